/**
 * The observe phase with the API server watched: at rest the watch answers and the API server is
 * not asked; otherwise a fresh list decides. An API server whose etcd is gone keeps its watches
 * open while its lists fail: the watch's copy must not vouch for parents that are not running.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { manifestFileName } from "../../lib/core/checkpoint_layout.ts";
import { Agent } from "../../lib/pass/agent.ts";
import { atRest } from "../../lib/pass/observe.ts";
import { connectNode } from "../../lib/sources/node.ts";
import { AgentStores } from "../../lib/store/agent_stores.ts";
import type { SimNode } from "../../lib/sim/node.ts";
import { LogCapture, ManualClock } from "../admin/harness.ts";
import { pod } from "../helpers/pods.ts";
import { withNode } from "../helpers/sim_node.ts";
import { until, untilSettled } from "../helpers/until.ts";

interface Watching {
  node: SimNode;
  /** A pass, then the simulated kubelet catches up with what it wrote. */
  pass(): ReturnType<Agent["pass"]>;
  /** The node's pods are watched, in sync. */
  watched(): boolean;
  clock: ManualClock;
  /** Every change the sources told, in order. */
  told: string[];
}

async function withWatchingAgent(
  fn: (w: Watching) => Promise<void>,
  before?: (node: SimNode) => void,
) {
  await withNode(async (node) => {
    before?.(node);
    const config = node.config();
    // Files written by the test count as settled: the clients are not built again.
    const sources = await connectNode(config, { watch: true, now: () => Date.now() + 2_000 });
    const told: string[] = [];
    sources.changes?.subscribe((reason) => told.push(reason));
    const log = new LogCapture();
    const clock = new ManualClock();
    try {
      const stores = await AgentStores.open(config.stateDir, log.logger);
      const agent = new Agent({ config, sources, clock, log: log.logger });
      const pass = async () => {
        const report = await agent.pass(stores);
        await node.sync();
        return report;
      };
      const watched = () => sources.apiServer.watchedNodePods?.(config.nodeName) !== undefined;
      await fn({ node, pass, watched, clock, told });
    } finally {
      sources.close?.();
      sources.runtime.close();
    }
  });
}

const API_SERVER_CA = "kube-system/kube-apiserver-7x2kq/kube-apiserver/ca.crt";

/** A file the agent stored for a parent's secret. */
function storedSecret(node: SimNode, path: string): string {
  return Deno.readTextFileSync(join(node.config().secretsDir, path));
}

Deno.test("at rest the watch answers for the API server: a pass lists nothing", async () => {
  await withWatchingAgent(async ({ node, pass, watched }) => {
    await until("the pods are watched", watched);
    const first = await pass();
    assert(first.complete, JSON.stringify(first.failures));
    const parents = Object.keys(first.plan.state);
    assert(parents.length > 0);
    // The objects' watches, started by the first pass, list too: only the pods' lists count.
    const podLists = () =>
      node.apiServer.requests.filter((r) =>
        r.target.startsWith("/api/v1/pods?") && !r.target.includes("watch=")
      ).length;
    const lists = podLists();
    const second = await pass();
    assertEquals(second.failures, []);
    for (const id of parents) assertEquals(second.plan.state[id], { state: "inactive" });
    assertEquals(podLists(), lists);
  });
});

Deno.test("etcd gone, the watch still open: a fresh list fails, the API server is unavailable, every stopped parent's copy is activated", async () => {
  await withWatchingAgent(async ({ node, pass, watched }) => {
    await until("the pods are watched", watched);
    const first = await pass();
    const parents = Object.keys(first.plan.state).sort();
    await pass();
    await node.loseControlPlane("etcd-gone");
    // The danger: the watch is still open and still holds every parent.
    assert(watched());
    assert(node.apiServer.watchesOpen() >= 1);
    const lists = node.apiServer.requestsByVerb().list;

    const outage = await pass();
    assert(node.apiServer.requestsByVerb().list > lists, "no fresh list was asked");
    assertEquals(
      outage.failures.map((f) => [f.source, f.kind]).filter(([s]) => s === "apiserver"),
      [
        ["apiserver", "server-error"],
      ],
    );
    assertEquals(outage.plan.starts, parents);
    const active = [...Deno.readDirSync(node.config().staticPodDir)].map((e) => e.name);
    for (const id of parents) assert(active.includes(manifestFileName(id)), id);
  });
});

Deno.test("a secret changed reaches its stored file at the next pass, from the watch, with no GET", async () => {
  await withWatchingAgent(async ({ node, pass, watched, told }) => {
    await until("the pods are watched", watched);
    await pass();
    await pass();
    // The node's pods, and every secret and configmap its parents mount.
    await until("the objects are watched", () => node.apiServer.watchesOpen() > 1);
    const open = node.apiServer.watchesOpen();
    await until("every object in sync", () => node.apiServer.requestsByVerb().watch >= open);
    assert(storedSecret(node, API_SERVER_CA).includes("BEGIN CERTIFICATE"));
    const asked = node.apiServer.requestsByVerb();

    node.apiServer.setSecret("kube-system", "kube-apiserver", { "ca.crt": "rotated" });
    await until("the change is told", () => told.includes("secret changed"));
    const report = await pass();
    assertEquals(storedSecret(node, API_SERVER_CA), "rotated");
    assert(report.applied.some((a) => a.op === "files"), JSON.stringify(report.applied));
    const after = node.apiServer.requestsByVerb();
    assertEquals([after.get, after.list], [asked.get, asked.list]);
  });
});

Deno.test("a stored file changed or deleted by hand is put back at the next refresh", async () => {
  await withWatchingAgent(async ({ node, pass, watched, clock }) => {
    await until("the pods are watched", watched);
    await pass();
    await pass();
    const path = join(node.config().secretsDir, API_SERVER_CA);
    const stored = storedSecret(node, API_SERVER_CA);
    const refresh = async () => {
      clock.advance(node.config().refreshIntervalMs);
      const report = await pass();
      assertEquals(report.failures, []);
      return report.applied.filter((a) => a.op === "files");
    };
    // Read back once it is settled, and from then on known by its stat.
    await untilSettled(path);
    assertEquals(await refresh(), []);

    // Same size, mtime set back: only its ctime tells.
    const { mtime } = Deno.lstatSync(path);
    Deno.writeTextFileSync(path, "x".repeat(new TextEncoder().encode(stored).length));
    Deno.utimeSync(path, mtime!, mtime!);
    assertEquals((await refresh()).length, 1);
    assertEquals(storedSecret(node, API_SERVER_CA), stored);

    Deno.removeSync(path);
    assertEquals((await refresh()).length, 1);
    assertEquals(storedSecret(node, API_SERVER_CA), stored);
  });
});

for (const mode of ["forbidden", "method-not-allowed"] as const) {
  Deno.test(`watches refused (${mode}): the pass lists, and GETs store and refresh the files`, async () => {
    await withWatchingAgent(async ({ node, pass, clock }) => {
      const first = await pass();
      assertEquals(first.failures, []);
      assert(storedSecret(node, API_SERVER_CA).includes("BEGIN CERTIFICATE"));
      node.apiServer.setSecret("kube-system", "kube-apiserver", { "ca.crt": "rotated" });
      clock.advance(node.config().refreshIntervalMs);
      const lists = node.apiServer.requestsByVerb().list;
      await pass();
      assertEquals(storedSecret(node, API_SERVER_CA), "rotated");
      assert(node.apiServer.requestsByVerb().list > lists);
      assertEquals(node.apiServer.watchesOpen(), 0);
    }, (node) => node.apiServer.setWatchMode(mode));
  });
}

Deno.test("without the watch option nothing is watched: --once, plan, verify and doctor ask with GETs", async () => {
  await withNode(async (node) => {
    const sources = await connectNode(node.config());
    try {
      assert((await sources.apiServer.listNodePods(node.nodeName)).ok);
      assertEquals(sources.apiServer.watchedNodePods?.(node.nodeName), undefined);
      assertEquals(sources.changes, undefined);
      assertEquals(node.apiServer.watchesOpen(), 0);
      assertEquals(node.apiServer.requestsByVerb().watch, 0);
    } finally {
      sources.runtime.close();
    }
  });
});

Deno.test("at rest: every tracked parent inactive and running here, no checkpoint in the static-pod dir", () => {
  const running = [{ namespace: "kube-system", name: "etcd", uid: "u1" }] as
    & Parameters<
      typeof atRest
    >[1]
    & object;
  const inactive = new Map([["kube-system/etcd", { name: "inactive" as const }]]);
  assert(atRest(inactive, running, [pod("kube-system/kube-apiserver")]));
  assert(atRest(new Map(), [], []));
  // The runtime did not answer: nothing says the parents run.
  assert(!atRest(inactive, undefined, []));
  assert(!atRest(inactive, [], []));
  assert(!atRest(new Map([["kube-system/etcd", { name: "active" as const }]]), running, []));
  const copy = pod("kube-system/etcd-cp-1", {
    "checkpointer.alpha.coreos.com/checkpoint-of": "etcd",
  });
  assert(!atRest(inactive, running, [copy]));
});
