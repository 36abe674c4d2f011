/**
 * `ckpt-agent demo` as a newcomer runs it: a subprocess with exactly the compiled binary's
 * permissions, its temp files in a directory of its own so that what it leaves behind can be
 * seen. The story is checked step by step from the JSON, not only from the demo's own verdict.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { CANDIDATE_FILE, manifestFileName, versionsDir } from "../../lib/core/checkpoint_layout.ts";
import { isValidParent, podId } from "../../lib/core/pod.ts";
import { parseInstant } from "../../lib/core/time.ts";
import type { DemoResult } from "../../lib/demo/run.ts";
import type { PassRecord, StepRecord } from "../../lib/demo/step.ts";
import { controlPlane } from "../../lib/sim/control_plane.ts";
import { agentDenoFlags } from "../../scripts/permissions.ts";
import { runCli } from "../helpers/cli.ts";
import { withTempDir } from "../helpers/temp_dir.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;
const REPO = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");
const NODE = "cp-1";
const PARENTS = controlPlane(NODE).pods.filter(isValidParent).map(podId).sort();
const COPIES = PARENTS.map((id) => `${id}-${NODE}`);
const SCHEDULER = PARENTS.find((id) => id.includes("kube-scheduler"))!;
const API_SERVER = PARENTS.find((id) => id.includes("kube-apiserver"))!;
const CONTROLLER_MANAGER = PARENTS.find((id) => id.includes("kube-controller-manager"))!;
const MANIFESTS = PARENTS.map(manifestFileName);
const INACTIVE_DIR = "etc/kubernetes/inactive-manifests";
const STATIC_POD_DIR = "etc/kubernetes/manifests";
const STEPS = [
  "checkpoints-taken",
  "control-plane-lost",
  "checkpoints-activated",
  "control-plane-returns",
  "copies-withdrawn",
  "parent-deleted",
  "bad-rollout",
  "crash-loop-judged",
  "copy-stays",
  "rolled-back",
  "copy-withdrawn",
];
const CRASH_LOOP_AFTER_NS = 30_000_000_000n;

async function entries(dir: string): Promise<string[]> {
  return (await Array.fromAsync(Deno.readDir(dir))).map((e) => e.name);
}

function passes(step: StepRecord): PassRecord[] {
  return step.events.filter((e) => e.type === "pass");
}

function sorted(list: string[]): string[] {
  return [...list].sort();
}

function changeRows(pass: PassRecord | StepRecord) {
  return pass.changes.map((c) => [c.id, c.from, c.to, c.reason]);
}

/** The agent's clock from one pass to another, in nanoseconds. */
function between(from: PassRecord, to: PassRecord): bigint {
  return parseInstant(to.at)! - parseInstant(from.at)!;
}

Deno.test("the demo's JSON shows every step of the story, and nothing is left behind", async (t) => {
  await withTempDir(async (tmp) => {
    // Also denied: reading the source tree. The compiled binary carries what it needs.
    const run = await runCli(["demo", "--output", "json"], {
      denoFlags: [...agentDenoFlags(), `--deny-read=${REPO}`],
      env: { TMPDIR: tmp },
    });
    assertEquals(run.code, 0, run.stderr);
    const result: DemoResult = JSON.parse(run.stdout);
    const step = (name: string) => result.steps.find((s) => s.name === name)!;

    await t.step("every step ran, in order, and every expectation held", () => {
      assertEquals(result.steps.map((s) => s.name), STEPS);
      for (const s of result.steps) {
        assertEquals(s.checks.filter((c) => !c.held), [], s.name);
        assert(s.ok, s.name);
      }
      assert(result.ok);
      assertEquals(result.stopped, undefined);
    });

    await t.step("the foreign etcd.yaml is never touched", () => {
      for (const s of result.steps) {
        assert(s.staticPodDir.includes("etcd.yaml"), s.name);
        assert(s.checks.some((c) => c.expect.startsWith("etcd.yaml") && c.held), s.name);
      }
    });

    await t.step("1: checkpoints are taken", () => {
      const s = step("checkpoints-taken");
      const [pass] = passes(s);
      assertEquals(s.plan, { starts: [], stops: PARENTS, removes: [] });
      assertEquals(s.changes.map((c) => [c.id, c.from, c.to, c.reason]), [
        ...PARENTS.map((id) => [id, "none", "inactive", "ParentRunning"]),
      ]);
      const created = new Map(pass.disk.created.map((f) => [f.path, f]));
      for (const manifest of MANIFESTS) {
        assertEquals(created.get(`etc/kubernetes/inactive-manifests/${manifest}`)?.mode, "0600");
      }
      const secrets = pass.disk.created.filter((f) =>
        f.type === "file" && f.path.startsWith("etc/kubernetes/checkpoint-secrets/")
      );
      assert(secrets.some((f) => f.path.endsWith("/apiserver.key")));
      // The pods have an fsGroup: their files are group-readable, by the pods alone.
      assert(secrets.every((f) => f.mode === "0640" && f.owner === result.node.podUser));
      assertEquals(s.staticPodDir, ["etcd.yaml"]);
    });

    await t.step("2: the control plane is lost; the agent would activate", () => {
      const s = step("control-plane-lost");
      const [pass] = passes(s);
      assert(s.dryRun && pass.dryRun);
      assert(pass.sources.apiserver.startsWith("unreachable"), pass.sources.apiserver);
      assertEquals(pass.sources.runtime, "ok");
      assertEquals(s.plan, { starts: PARENTS, stops: [], removes: [] });
      assertEquals(pass.disk, { created: [], changed: [], removed: [] });
      assertEquals(s.staticPodDir, ["etcd.yaml"]);
      assert(PARENTS.every((id) => !s.running.includes(id)));
    });

    await t.step("3: the checkpoints are activated and the kubelet runs them", () => {
      const s = step("checkpoints-activated");
      assert(!s.dryRun);
      assertEquals(s.plan, { starts: PARENTS, stops: [], removes: [] });
      assertEquals(s.changes.map((c) => [c.id, c.from, c.to, c.reason]), [
        ...PARENTS.map((id) => [id, "inactive", "active", "ControlPlaneUnavailable"]),
      ]);
      assertEquals(s.staticPodDir, sorted(["etcd.yaml", ...MANIFESTS]));
      assert(COPIES.every((id) => s.running.includes(id)), s.running.join());
    });

    await t.step(
      "4: the control plane returns; the agent would withdraw once the parents' containers exist",
      () => {
        const s = step("control-plane-returns");
        assert(s.dryRun);
        const [sandboxesOnly, containers] = passes(s);
        assertEquals(sandboxesOnly.complete, true);
        assertEquals(sandboxesOnly.plan.stops, []);
        assertEquals(containers.plan.stops, PARENTS);
        assertEquals(s.plan, { starts: [], stops: PARENTS, removes: [] });
        assert([...PARENTS, ...COPIES].every((id) => s.running.includes(id)), s.running.join());
        assertEquals(s.staticPodDir, sorted(["etcd.yaml", ...MANIFESTS]));
      },
    );

    await t.step("5: the copies are withdrawn", () => {
      const s = step("copies-withdrawn");
      assertEquals(s.plan, { starts: [], stops: PARENTS, removes: [] });
      assertEquals(s.changes.map((c) => [c.id, c.from, c.to, c.reason]), [
        ...PARENTS.map((id) => [id, "active", "inactive", "ParentRunning"]),
      ]);
      assertEquals(s.staticPodDir, ["etcd.yaml"]);
      assert(COPIES.every((id) => !s.running.includes(id)), s.running.join());
      assert(PARENTS.every((id) => s.running.includes(id)), s.running.join());
    });

    await t.step("6: a parent is deleted and garbage-collected after the grace period", () => {
      const s = step("parent-deleted");
      const [grace, expiry] = passes(s);
      assertEquals(grace.changes.map((c) => [c.id, c.to, c.reason]), [
        [SCHEDULER, "inactive-grace", "ParentDeleted"],
      ]);
      assertEquals(grace.plan.removes, []);
      assertEquals(expiry.plan.removes, [SCHEDULER]);
      assertEquals(expiry.changes.map((c) => [c.id, c.to, c.reason]), [
        [SCHEDULER, "remove", "GracePeriodExpired"],
      ]);
      const waited = parseInstant(expiry.at)! - parseInstant(grace.at)!;
      assert(waited >= BigInt(result.node.gracePeriodSeconds) * 1_000_000_000n);
      const manifest = `etc/kubernetes/inactive-manifests/${manifestFileName(SCHEDULER)}`;
      assert(expiry.disk.removed.includes(manifest));
      assert(expiry.disk.removed.some((p) => p.startsWith("etc/kubernetes/checkpoint-secrets/")));
      assertEquals(Object.keys(expiry.plan.state), PARENTS.filter((id) => id !== SCHEDULER));
      assertEquals(s.staticPodDir, ["etcd.yaml"]);
    });

    // The bad rollout's pods, as the DaemonSet named them: the crash-looping one, then the
    // one the operator rolled back to.
    const rolloutPods = passes(step("bad-rollout"))[0].changes.map((c) => c.id)
      .filter((id) => id !== API_SERVER);
    const BAD = rolloutPods[0];
    const FIXED = passes(step("rolled-back"))[0].changes.map((c) => c.id)
      .find((id) => id !== BAD)!;

    await t.step("7: a bad rollout takes the API server away", () => {
      const s = step("bad-rollout");
      const [first, second] = passes(s);
      assertEquals(rolloutPods.length, 1, rolloutPods.join());
      assert(BAD.startsWith("kube-system/kube-apiserver-"), BAD);
      assert(first.sources.apiserver.startsWith("unreachable"), first.sources.apiserver);
      assertEquals([first.sources.kubelet, first.sources.runtime], ["ok", "ok"]);
      // The old pod's checkpoint, its parent gone and no API server, is activated as in any
      // outage; the new pod inherits its kept version, and its spec waits as a candidate.
      assertEquals(changeRows(first), [
        [API_SERVER, "inactive", "active", "ControlPlaneUnavailable"],
        [BAD, "none", "inactive", "ParentRunning"],
      ]);
      assertEquals(first.plan.starts, [API_SERVER]);
      assert(first.log.some((l) => l.msg === "checkpoint inherited from its predecessor"));
      const created = first.disk.created.map((f) => f.path);
      const versions = versionsDir({ inactiveDir: INACTIVE_DIR }, BAD);
      assert(created.includes(`${versions}/1.json`), created.join());
      assert(created.includes(`${versions}/${CANDIDATE_FILE}`), created.join());
      // The next pass: the old pod's copy serves, and is removed, superseded by the new pod's.
      assertEquals(second.sources.apiserver, "ok");
      assertEquals(changeRows(second), [[API_SERVER, "active", "remove", "Superseded"]]);
      assertEquals(second.plan.removes, [API_SERVER]);
      assert(second.disk.removed.includes(`${STATIC_POD_DIR}/${manifestFileName(API_SERVER)}`));
      assert(second.disk.removed.includes(`${INACTIVE_DIR}/${manifestFileName(API_SERVER)}`));
      assertEquals(s.staticPodDir, ["etcd.yaml"]);
      assert(s.running.includes(BAD) && !s.running.includes(`${API_SERVER}-${NODE}`));
    });

    await t.step("8: the new pod is judged crash-looping, and the kept version takes over", () => {
      const s = step("crash-loop-judged");
      const [pass] = passes(s);
      assert(pass.sources.apiserver.startsWith("unreachable"), pass.sources.apiserver);
      assertEquals(
        pass.changes.map((c) => [c.id, c.from, c.to, c.reason, c.message]),
        [[
          BAD,
          "inactive",
          "active",
          "ParentCrashLooping",
          "parent crash-looping on an unproven spec: kept version 1 active",
        ]],
      );
      assertEquals(s.plan, { starts: [BAD], stops: [], removes: [] });
      assert(between(passes(step("bad-rollout"))[1], pass) >= CRASH_LOOP_AFTER_NS);
      assertEquals(s.staticPodDir, sorted(["etcd.yaml", manifestFileName(BAD)]));
      assert(s.running.includes(`${BAD}-${NODE}`), s.running.join());
    });

    await t.step("9: the copy stays while the pod crash-loops and the API server is back", () => {
      const s = step("copy-stays");
      const all = passes(s);
      assertEquals(all.length, 3);
      for (const pass of all) {
        assertEquals(pass.sources, { apiserver: "ok", kubelet: "ok", runtime: "ok" });
        assertEquals(pass.changes, []);
        assertEquals(pass.plan.state[BAD], { state: "active" });
      }
      assertEquals(s.plan, { starts: [], stops: [], removes: [] });
      assert(between(all[0], all[2]) >= 4n * 60_000_000_000n);
      assertEquals(s.staticPodDir, sorted(["etcd.yaml", manifestFileName(BAD)]));
      assert(s.running.includes(`${BAD}-${NODE}`), s.running.join());
    });

    await t.step("10: the operator rolls back through the API the copy serves", () => {
      const s = step("rolled-back");
      const [pass] = passes(s);
      assert(FIXED.startsWith("kube-system/kube-apiserver-") && FIXED !== BAD, FIXED);
      assertEquals(pass.sources, { apiserver: "ok", kubelet: "ok", runtime: "ok" });
      assertEquals(changeRows(pass), [
        [BAD, "active", "active-grace", "ParentDeleted"],
        [FIXED, "none", "inactive", "ParentRunning"],
      ]);
      assertEquals(pass.plan.stops, [FIXED]);
      const badCandidate = `${versionsDir({ inactiveDir: INACTIVE_DIR }, BAD)}/${CANDIDATE_FILE}`;
      assert(pass.disk.removed.includes(badCandidate), pass.disk.removed.join());
      assertEquals(s.staticPodDir, sorted(["etcd.yaml", manifestFileName(BAD)]));
      assert(s.running.includes(`${BAD}-${NODE}`) && s.running.includes(FIXED));
    });

    await t.step("11: the copy is withdrawn, and the new pod serves", () => {
      const s = step("copy-withdrawn");
      const [withdrawn, hole, serving] = passes(s);
      assertEquals(changeRows(withdrawn), [[BAD, "active-grace", "remove", "Superseded"]]);
      assertEquals(withdrawn.plan.removes, [BAD]);
      assert(withdrawn.disk.removed.includes(`${STATIC_POD_DIR}/${manifestFileName(BAD)}`));
      // Between the copy and the new pod's restart the agent sees no API server, and waits.
      assert(hole.sources.apiserver.startsWith("unreachable"), hole.sources.apiserver);
      assertEquals([hole.changes, hole.plan.starts], [[], []]);
      assertEquals(serving.sources, { apiserver: "ok", kubelet: "ok", runtime: "ok" });
      assertEquals(serving.changes, []);
      assertEquals(Object.keys(serving.plan.state), [FIXED, CONTROLLER_MANAGER]);
      assertEquals(serving.plan.state[FIXED], { state: "inactive" });
      assertEquals(s.staticPodDir, ["etcd.yaml"]);
      assert(s.running.includes(FIXED) && !s.running.some((id) => id.startsWith(BAD)));
    });

    await t.step("the node's directory and every temp file are gone", async () => {
      assertEquals(result.leftBehind, []);
      assert(result.node.root.startsWith(tmp));
      assertEquals(await entries(tmp), []);
    });
  });
});

Deno.test("the narration tells every step, keeps log lines out, and ends with the verdict", async () => {
  await withTempDir(async (tmp) => {
    const run = await runCli(["demo"], { denoFlags: agentDenoFlags(), env: { TMPDIR: tmp } });
    assertEquals(run.code, 0, run.stderr);
    for (const [i, title] of STEPS.entries()) {
      assert(run.stdout.includes(`${i + 1}/${STEPS.length} `), title);
    }
    assert(run.stdout.includes("61 s later"));
    assert(run.stdout.includes("30 s later"));
    // The reason line, however the narration wraps it.
    assert(
      run.stdout.replace(/\s+/g, " ").includes(
        "why: ParentCrashLooping: parent crash-looping on an unproven spec: kept version 1 active",
      ),
    );
    assert(run.stdout.trimEnd().endsWith("Demo OK."));
    assert(!run.stdout.includes('"level"') && !run.stderr.includes('"level"'), run.stderr);
    assertEquals(await entries(tmp), []);
  });
});

for (const [signal, code] of [["SIGINT", 130], ["SIGTERM", 143]] as const) {
  Deno.test(`${signal} stops the demo, closes the node and removes its directory`, async () => {
    await withTempDir(async (tmp) => {
      const child = new Deno.Command(Deno.execPath(), {
        args: ["run", ...agentDenoFlags(), "--quiet", MAIN, "demo", "--pause"],
        env: { TMPDIR: tmp, NO_COLOR: "1" },
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const stderr = new Response(child.stderr).text();
      let stdout = "";
      let sent = false;
      const decoder = new TextDecoder();
      // The demo waits for Enter after its first step: the signal arrives in the middle of it.
      for await (const chunk of child.stdout) {
        stdout += decoder.decode(chunk, { stream: true });
        if (!sent && stdout.includes("Press Enter")) {
          child.kill(signal);
          sent = true;
        }
      }
      const status = await child.status;
      await child.stdin.close();
      assert(sent, stdout);
      assertEquals(status.code, code, await stderr);
      assert(stdout.includes(`interrupted by ${signal}`), stdout);
      assert(!stdout.includes(`2/${STEPS.length}`), "the story went on after the signal");
      assertEquals(await entries(tmp), []);
    });
  });
}

Deno.test("--pause is for people: not with --output json", async () => {
  const run = await runCli(["demo", "--pause", "--output", "json"]);
  assertEquals(run.code, 2);
  assert(run.stderr.includes("--pause"), run.stderr);
});
