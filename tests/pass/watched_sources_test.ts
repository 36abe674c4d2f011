/**
 * The observe phase with the API server watched: at rest the watch answers and the API server is
 * not asked; otherwise a fresh list decides. An API server whose etcd is gone keeps its watches
 * open while its lists fail: the watch's copy must not vouch for parents that are not running.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { dirname, join } from "node:path";
import { manifestFileName } from "../../lib/core/checkpoint_layout.ts";
import { Agent } from "../../lib/pass/agent.ts";
import { atRest, trackedFromStore } from "../../lib/pass/observe.ts";
import type { Pod } from "../../lib/core/pod.ts";
import { isFrozenWhole } from "../../lib/util/frozen.ts";
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
  pass(opts?: Parameters<Agent["pass"]>[1]): ReturnType<Agent["pass"]>;
  /** The node's pods are watched, in sync. */
  watched(): boolean;
  /** The node's pods as their watch holds them. */
  watchedPods(): Pod[] | undefined;
  clock: ManualClock;
  /** Every change the sources told, in order. */
  told: string[];
  /** Secrets and configmaps the pass asked the client for, whether a watch or a GET answered. */
  asked(): number;
  /** What a pass would see, given the manifest dirs' watch's `quiet`. */
  observe(dirsQuiet?: number): ReturnType<Agent["observe"]>;
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
    let asked = 0;
    const { getSecret, getConfigMap } = sources.apiServer;
    sources.apiServer.getSecret = (...args) => (asked++, getSecret(...args));
    sources.apiServer.getConfigMap = (...args) => (asked++, getConfigMap(...args));
    const told: string[] = [];
    sources.changes?.subscribe((reason) => told.push(reason));
    const log = new LogCapture();
    const clock = new ManualClock();
    try {
      const stores = await AgentStores.open(config.stateDir, log.logger);
      const agent = new Agent({ config, sources, clock, log: log.logger });
      const pass = async (opts?: Parameters<Agent["pass"]>[1]) => {
        const report = await agent.pass(stores, opts);
        await node.sync();
        return report;
      };
      const watched = () => sources.apiServer.watchedNodePods?.(config.nodeName) !== undefined;
      const watchedPods = () => sources.apiServer.watchedNodePods?.(config.nodeName);
      const observe = (dirsQuiet?: number) =>
        agent.observe(trackedFromStore(stores.status), dirsQuiet);
      await fn({ node, pass, watched, watchedPods, clock, told, asked: () => asked, observe });
    } finally {
      sources.close?.();
      sources.runtime.close();
    }
  });
}

const APISERVER_ID = "kube-system/kube-apiserver-7x2kq";
const API_SERVER_CA = `${APISERVER_ID}/kube-apiserver/ca.crt`;

/** A file the agent stored for a parent's secret. */
function storedSecret(node: SimNode, path: string): string {
  return Deno.readTextFileSync(join(node.config().secretsDir, path));
}

Deno.test("at rest the watch answers for the API server: a pass lists nothing", async () => {
  await withWatchingAgent(async ({ node, pass, watched, watchedPods }) => {
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
    // What the watch answered with is frozen whole: the pass may keep what it derives from it.
    const pods = watchedPods()!;
    assert(pods.length > 0 && pods.every(isFrozenWhole));
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

/** The entry last changed under `dirs`, the dirs included. */
function lastChanged(dirs: string[]): string {
  let last = { path: dirs[0], ctime: 0 };
  const walk = (path: string) => {
    const info = Deno.lstatSync(path);
    if (info.ctime!.getTime() >= last.ctime) last = { path, ctime: info.ctime!.getTime() };
    if (info.isDirectory) { for (const e of Deno.readDirSync(path)) walk(join(path, e.name)); }
  };
  dirs.forEach(walk);
  return last.path;
}

/** The objects' watches are open and in sync, and every file the agent wrote is settled. */
async function untilAtRest(node: SimNode) {
  await until("the objects are watched", () => node.apiServer.watchesOpen() > 1);
  const open = node.apiServer.watchesOpen();
  await until("every object in sync", () => node.apiServer.requestsByVerb().watch >= open);
  const { secretsDir, configmapsDir, inactiveDir } = node.config();
  await untilSettled(lastChanged([secretsDir, configmapsDir, inactiveDir]));
}

Deno.test("a refresh with nothing changed makes no checkpoint again; a change by hand or by watch is still stored", async () => {
  await withWatchingAgent(async ({ node, pass, watched, clock, told, asked }) => {
    await until("the pods are watched", watched);
    await pass();
    await pass();
    await untilAtRest(node);
    const path = join(node.config().secretsDir, API_SERVER_CA);
    const dir = dirname(path);
    const stored = storedSecret(node, API_SERVER_CA);
    /** A refresh: the files it stored, and how many objects it asked for. */
    const refresh = async () => {
      clock.advance(node.config().refreshIntervalMs);
      const before = asked();
      const report = await pass();
      assertEquals(report.failures, []);
      return {
        files: report.applied.filter((a) => a.op === "files").length,
        asked: asked() - before,
      };
    };
    // The first refresh over settled files checks them all and finds them in place.
    const first = await refresh();
    assertEquals(first.files, 0);
    assert(first.asked > 0);
    const requests = node.apiServer.requests.length;
    // From then on, nothing is asked or made while nothing changes.
    assertEquals(await refresh(), { files: 0, asked: 0 });
    assertEquals(await refresh(), { files: 0, asked: 0 });
    assertEquals(node.apiServer.requests.length, requests);

    // Same size, mtime set back: only its ctime tells.
    const { mtime } = Deno.lstatSync(path);
    Deno.writeTextFileSync(path, "x".repeat(new TextEncoder().encode(stored).length));
    Deno.utimeSync(path, mtime!, mtime!);
    assertEquals((await refresh()).files, 1);
    assertEquals(storedSecret(node, API_SERVER_CA), stored);

    await untilAtRest(node);
    assert((await refresh()).asked > 0);
    assertEquals(await refresh(), { files: 0, asked: 0 });
    Deno.removeSync(path);
    assertEquals((await refresh()).files, 1);
    assertEquals(storedSecret(node, API_SERVER_CA), stored);

    // A file added by hand beside the stored ones goes too.
    await untilAtRest(node);
    await refresh();
    assertEquals(await refresh(), { files: 0, asked: 0 });
    const extra = join(dir, "extra.crt");
    Deno.writeTextFileSync(extra, "not ours");
    assertEquals((await refresh()).files, 1);
    assertEquals(
      [...Deno.readDirSync(dir)].some((e) => e.name === "extra.crt"),
      false,
    );

    // A change told by the watch is stored at the next pass, refresh due or not.
    await untilAtRest(node);
    await refresh();
    assertEquals(await refresh(), { files: 0, asked: 0 });
    const toldBefore = told.length;
    node.apiServer.setSecret("kube-system", "kube-apiserver", { "ca.crt": "rotated" });
    await until("the change is told", () => told.slice(toldBefore).includes("secret changed"));
    await pass();
    assertEquals(storedSecret(node, API_SERVER_CA), "rotated");
  });
});

Deno.test("a pass at rest whose manifest dirs' watch told nothing since the last does not read them; any other pass does", async () => {
  await withWatchingAgent(async ({ node, pass, watched, observe }) => {
    await until("the pods are watched", watched);
    await pass();
    await pass();
    const inactive = () => [...Deno.readDirSync(node.config().inactiveDir)];
    const listed = (obs: Awaited<ReturnType<typeof observe>>) =>
      [obs.manifestDirsQuiet, obs.input.observations.inactiveCheckpoints.length] as const;
    const files = inactive().filter((e) => e.isFile).map((e) => e.name);
    assert(files.length > 1);
    assertEquals(listed(await observe(7)), [false, files.length]);
    // Removed behind a watch that told nothing: such a pass goes on what the last one read.
    Deno.removeSync(join(node.config().inactiveDir, files[0]));
    assertEquals(listed(await observe(7)), [true, files.length]);
    assertEquals(listed(await observe()), [false, files.length - 1]);
    assertEquals(listed(await observe(8)), [false, files.length - 1]);
    assertEquals(listed(await observe(8)), [true, files.length - 1]);

    // Not at rest (the control plane's parents stopped): the dirs are read, whatever was told.
    await node.loseControlPlane("etcd-gone");
    Deno.removeSync(join(node.config().inactiveDir, files[1]));
    assertEquals(listed(await observe(8)), [false, files.length - 2]);
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
      // Unchanged since, an object no watch knows is still asked at every refresh.
      await untilSettled(dirname(join(node.config().secretsDir, API_SERVER_CA)));
      for (let i = 0; i < 2; i++) {
        const gets = node.apiServer.requestsByVerb().get;
        clock.advance(node.config().refreshIntervalMs);
        await pass();
        assert(node.apiServer.requestsByVerb().get > gets);
      }
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

/**
 * Every file system call made while `fn` runs on a path under one of `dirs`: the stat, read or
 * listing of a stored file, a manifest or a dir.
 */
async function fsCallsUnder<T>(dirs: string[], fn: () => Promise<T>): Promise<string[]> {
  const names = [
    "stat",
    "lstat",
    "statSync",
    "lstatSync",
    "readDir",
    "readDirSync",
    "readFile",
    "readTextFile",
    "readFileSync",
    "readTextFileSync",
    "open",
    "openSync",
    "realPath",
    "realPathSync",
  ] as const;
  const calls: string[] = [];
  const fs = Deno as unknown as Record<string, (path: string | URL, ...rest: unknown[]) => unknown>;
  const saved = names.map((name) => [name, fs[name]] as const);
  for (const [name, original] of saved) {
    fs[name] = (path, ...rest) => {
      if (dirs.some((dir) => String(path).startsWith(dir))) calls.push(`${name} ${path}`);
      return original.call(Deno, path, ...rest);
    };
  }
  try {
    await fn();
  } finally {
    for (const [name, original] of saved) fs[name] = original;
  }
  return calls;
}

Deno.test("a poll that finds nothing new is idle: no file looked at; a changed answer, an event, a manifest dir's change, a refresh due each make a full pass", async () => {
  await withWatchingAgent(async ({ node, pass, watched, clock }) => {
    await until("the pods are watched", watched);
    await pass();
    await pass();
    await untilAtRest(node);
    const config = node.config();
    // Not the static-pod dir: the simulated kubelet, in this process, reads it for its answers.
    const dirs = [config.secretsDir, config.configmapsDir, config.inactiveDir, config.stateDir];
    /** A poll, with the daemon's counts of events and of the manifest dirs' changes. */
    const poll = (heard = 0, dirsQuiet = 0) => pass({ poll: true, heard, dirsQuiet });
    // The first poll with these counts is full, and leaves what the polls after it compare with.
    const full = await poll();
    assertEquals([full.idle, full.complete, full.applied], [undefined, true, []]);
    let idle: Awaited<ReturnType<typeof poll>> | undefined;
    const calls = await fsCallsUnder(dirs, async () => idle = await poll());
    assertEquals([idle?.idle, calls], [true, []]);
    assertEquals(idle?.plan, full.plan);
    assertEquals((await poll()).idle, true);

    // An event told since: a full pass, which the next poll compares with.
    assertEquals((await poll(1)).idle, undefined);
    assertEquals((await poll(1)).idle, true);
    // A change in a manifest dir.
    assertEquals((await poll(1, 1)).idle, undefined);
    assertEquals((await poll(1, 1)).idle, true);
    // A refresh due: the pass that makes it puts back a stored file changed by hand meanwhile.
    const path = join(config.secretsDir, API_SERVER_CA);
    const stored = storedSecret(node, API_SERVER_CA);
    Deno.writeTextFileSync(path, "changed by hand");
    assertEquals((await poll(1, 1)).idle, true);
    assertEquals(storedSecret(node, API_SERVER_CA), "changed by hand");
    clock.advance(config.refreshIntervalMs);
    const refreshed = await poll(1, 1);
    assertEquals(refreshed.idle, undefined);
    assertEquals(storedSecret(node, API_SERVER_CA), stored);
    // That pass wrote: the next one is full, and leaves what the polls after it compare with.
    assertEquals((await poll(1, 1)).idle, undefined);
    assertEquals((await poll(1, 1)).idle, true);
    // A request (not a poll) is always a full pass.
    assertEquals((await pass({ heard: 1, dirsQuiet: 1 })).idle, undefined);

    // A changed answer of the kubelet and the runtime, told by no event: a full pass.
    const [id] = Object.keys(full.plan.state).filter((id) => id !== APISERVER_ID);
    await node.deleteParent(id);
    const gone = await poll(1, 1);
    assertEquals([gone.idle, gone.plan.state[id]?.state], [undefined, "inactive-grace"]);
    // A grace period running: every poll is a full pass, and the one past its end removes it.
    assertEquals((await poll(1, 1)).idle, undefined);
    clock.advance(config.checkpointGracePeriodMs);
    const removed = await poll(1, 1);
    assertEquals([removed.idle, removed.plan.removes], [undefined, [id]]);
  });
});

Deno.test("during an outage the polls are idle while the kubelet and the runtime answer the same; the API server is asked again every poll interval", async () => {
  await withWatchingAgent(async ({ node, pass, watched, clock }) => {
    await until("the pods are watched", watched);
    await pass();
    const poll = () => pass({ poll: true, heard: 0, dirsQuiet: 0 });
    // Every request fails from now on, also once the server listens again (SimNode.sync).
    node.apiServer.setFault("server-error");
    await node.apiServer.stopListening();
    await until("the watch is broken", () => !watched());
    const lost = await poll();
    assert(lost.failures.some((f) => f.source === "apiserver"), JSON.stringify(lost.failures));
    assertEquals([lost.idle, lost.plan.starts], [undefined, []]);
    assertEquals((await poll()).idle, true);
    assertEquals((await poll()).idle, true);
    clock.advance(node.config().pollIntervalMs);
    const asked = await poll();
    assertEquals(asked.idle, undefined);
    assert(asked.failures.some((f) => f.source === "apiserver"));
    assertEquals((await poll()).idle, true);
  });
});
