/**
 * /readyz means "this node is protected": 503 naming the source or directory when the runtime
 * cannot be asked, the configuration is refused, or a checkpoint directory cannot be written
 * (a real tmpfs remounted read-only, or filled up), or an activated checkpoint's copy never
 * runs; 200 through an API server outage, even one the agent started in, and with a read-only
 * state dir, whose unrecorded checkpoints it names.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import type { Config } from "../../lib/config/types.ts";
import { formatInstant } from "../../lib/core/time.ts";
import { withTempDir } from "../helpers/temp_dir.ts";
import { parsePrometheusText, sampleValue } from "./prom_text.ts";
import { type Tmpfs, TMPFS_UNAVAILABLE, withTmpfs } from "../helpers/tmpfs.ts";
import { type ServedFixture, START, withServedDaemon } from "./harness.ts";

const PARENTS = [
  "kube-system/kube-apiserver-7x2kq",
  "kube-system/kube-controller-manager-m4t9z",
  "kube-system/kube-scheduler-q8w2c",
];
const MB = 1024 * 1024;

/** A served daemon whose `settings` put directories on a tmpfs of its own. */
function onTmpfs(
  settings: (fs: Tmpfs) => Partial<Config>,
  fn: (f: ServedFixture, fs: Tmpfs) => Promise<void>,
) {
  return withTmpfs(MB, (fs) => withServedDaemon({ config: settings(fs) }, (f) => fn(f, fs)));
}

async function readyz(f: ServedFixture) {
  const response = await f.request("/readyz");
  const body = await response.json();
  return {
    status: response.status,
    reasons: (body.notReady as { reason: string }[]).map((n) => n.reason),
    body,
  };
}

Deno.test("readyz: the runtime not answering is 503 naming it, and ready again once it answers", async () => {
  await withServedDaemon({}, async (f) => {
    await f.pass();
    assertEquals((await readyz(f)).status, 200);
    await f.node.stopRuntime();
    await f.pass();
    const ready = await readyz(f);
    assertEquals([ready.status, ready.reasons], [503, ["runtime"]]);
    assert(ready.body.error.startsWith("runtime unreachable: "), ready.body.error);
    assert(ready.body.error.includes(f.config.containerRuntimeEndpoint), ready.body.error);
    await f.node.startRuntime();
    await f.pass();
    assertEquals((await readyz(f)).status, 200);
  });
});

Deno.test("readyz: the API server down is ready, also for an agent started during the outage", async () => {
  await withServedDaemon({}, async (f) => {
    await f.node.loseControlPlane();
    await f.pass();
    const ready = await readyz(f);
    assertEquals(ready.status, 200);
    assertEquals(ready.body.lastPassComplete, false);
    assertEquals(ready.body.lastCompletePassAt, undefined);
    assertEquals(ready.body.lastPassFailures, ["apiserver unreachable", "kubelet forbidden"]);
  });
  await withServedDaemon({}, async (f) => {
    await f.node.loseControlPlane("etcd-gone");
    await f.pass();
    assertEquals((await readyz(f)).status, 200);
  });
});

Deno.test("readyz: copies the kubelet never runs are 503 once startTimeout has passed, naming them", async () => {
  // The simulated kubelet reads the node's manifests dir; this agent writes elsewhere.
  await withTempDir(async (dir) => {
    const config = { staticPodDir: join(dir, "manifests"), inactiveDir: join(dir, "inactive") };
    await withServedDaemon({ config }, async (f) => {
      const stalledMetric = async () => {
        const m = parsePrometheusText(await (await f.request("/metrics")).text());
        return [
          sampleValue(m, "ckpt_agent_stalled_checkpoints"),
          sampleValue(m, "ckpt_agent_not_ready", { reason: "stalled-start" }),
        ];
      };
      await f.pass();
      await f.node.loseControlPlane();
      assertEquals((await f.pass()).plan.starts, PARENTS);
      f.clock.advance(f.config.startTimeoutMs - 1);
      await f.pass();
      assertEquals((await readyz(f)).status, 200, "not before startTimeout");
      assertEquals(await stalledMetric(), [0, 0]);

      f.clock.advance(1);
      await f.pass();
      const ready = await readyz(f);
      assertEquals([ready.status, ready.reasons], [503, ["stalled-start"]]);
      assertEquals(
        ready.body.stalledStarts,
        PARENTS.map((id) => ({ id, activeSince: formatInstant(START), copy: `${id}-cp-1` })),
      );
      assert(ready.body.error.startsWith(`no copy runs of ${PARENTS[0]} (active since `));
      assertEquals(await stalledMetric(), [3, 1]);

      // The runtime gone: nothing is judged; the runtime is the reason.
      await f.node.stopRuntime();
      await f.pass();
      assertEquals((await readyz(f)).reasons, ["runtime"]);
      assertEquals(await stalledMetric(), [0, 0]);
      await f.node.startRuntime();
      await f.pass();
      assertEquals((await readyz(f)).reasons, ["stalled-start"]);

      // The parents back: the checkpoints are withdrawn, and the node is ready again.
      await f.node.restoreControlPlane();
      await f.pass();
      await f.pass();
      const back = await readyz(f);
      assertEquals([back.status, back.body.stalledStarts], [200, []]);
      assertEquals(await stalledMetric(), [0, 0]);
    });
  });
});

Deno.test("readyz: credentials refused while the API server answers are 503 (configuration)", async () => {
  await withServedDaemon({}, async (f) => {
    f.node.apiServer.setFault("forbidden");
    await f.pass();
    let ready = await readyz(f);
    assertEquals([ready.status, ready.reasons], [503, ["configuration"]]);
    assert(ready.body.error.startsWith("apiserver forbidden: "), ready.body.error);
    // The kubelet refusing while the API server answers is the agent's configuration too.
    f.node.apiServer.setFault("none");
    f.node.kubelet.secure.setFault("unauthorized");
    await f.pass();
    ready = await readyz(f);
    assertEquals([ready.status, ready.reasons], [503, ["configuration"]]);
    assert(ready.body.error.startsWith("kubelet unauthorized: "), ready.body.error);
  });
});

/** The static-pod dir on the tmpfs, made before the daemon starts. */
const staticPodDirOn = (fs: Tmpfs) => {
  Deno.mkdirSync(fs.path("manifests"));
  return { staticPodDir: fs.path("manifests") };
};

Deno.test({
  name: "readyz: a static-pod dir remounted read-only is 503 naming it",
  ignore: TMPFS_UNAVAILABLE !== undefined,
  fn: () =>
    onTmpfs(staticPodDirOn, async (f, fs) => {
      await f.pass();
      assertEquals((await readyz(f)).status, 200);
      await fs.readOnly(true);
      // A pass with nothing to write there: seen all the same.
      await f.pass();
      const ready = await readyz(f);
      assertEquals([ready.status, ready.reasons], [503, ["static-pod-dir"]]);
      assertEquals(
        ready.body.error,
        `static-pod dir ${f.config.staticPodDir}: on a read-only file system (${f.config.staticPodDir} refuses writes: EROFS)`,
      );
      await fs.readOnly(false);
      await f.pass();
      assertEquals((await readyz(f)).status, 200);
    }),
});

Deno.test({
  name: "readyz: a full static-pod dir that refused the last pass's activations is 503 naming it",
  ignore: TMPFS_UNAVAILABLE !== undefined,
  fn: () =>
    onTmpfs(staticPodDirOn, async (f, fs) => {
      await f.pass();
      const ballast = await fs.fill();
      // Full, but nothing had to be written there: still protected as far as can be known.
      await f.pass();
      assertEquals((await readyz(f)).status, 200);
      await f.node.loseControlPlane();
      const report = await f.pass();
      assertEquals(report.plan.starts, PARENTS);
      const ready = await readyz(f);
      assertEquals([ready.status, ready.reasons], [503, ["static-pod-dir"]]);
      const expected = `static-pod dir ${f.config.staticPodDir}: the last pass could not write it`;
      assert(ready.body.error.startsWith(`${expected}: start `), ready.body.error);
      assert(ready.body.error.includes("No space left on device"), ready.body.error);
      await Deno.remove(ballast);
      await f.pass();
      assertEquals((await readyz(f)).status, 200);
    }),
});

Deno.test({
  name: "readyz: a read-only state dir is ready, naming what is not recorded",
  ignore: TMPFS_UNAVAILABLE !== undefined,
  fn: () =>
    onTmpfs((fs) => ({ stateDir: fs.path("state") }), async (f, fs) => {
      await f.pass();
      await fs.readOnly(true);
      await f.node.loseControlPlane();
      await f.pass();
      let ready = await readyz(f);
      assertEquals(ready.status, 200);
      assertEquals(ready.body.notRecorded.checkpoints, PARENTS);
      assertEquals(ready.body.notRecorded.sandboxes, []);
      assertEquals(
        ready.body.notRecorded.path,
        `${f.config.stateDir}/status/${PARENTS[0].replace("/", "_")}.json`,
      );
      assert(ready.body.notRecorded.error.includes("Read-only file system"));
      assert(ready.body.lastPassFailures.includes("3 write(s) failed"));

      await fs.readOnly(false);
      await f.pass();
      ready = await readyz(f);
      assertEquals([ready.status, ready.body.notRecorded], [200, {
        checkpoints: [],
        sandboxes: [],
      }]);
    }),
});

Deno.test({
  name: "readyz: a state dir read-only from the start says so, and stays ready",
  ignore: TMPFS_UNAVAILABLE !== undefined,
  fn: () =>
    withTmpfs(MB, async (fs) => {
      await fs.readOnly(true);
      await withServedDaemon({ config: { stateDir: fs.path("state") } }, async (f) => {
        await f.pass();
        const ready = await readyz(f);
        assertEquals(ready.status, 200);
        assert(ready.body.stateDirReadOnly.includes("Read-only file system"));
        assertEquals(ready.body.notRecorded.checkpoints, PARENTS);
      });
    }),
});
