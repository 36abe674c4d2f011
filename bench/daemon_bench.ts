/**
 * The daemon as a node runs it, measured from outside: `main.ts run` with the unit's Deno flags
 * and glibc settings (scripts/permissions.ts) as a subprocess against a simulated node (poll
 * interval 5 s, the configuration's defaults otherwise), its CPU time and memory read from
 * /proc, what it does seen in the files it writes and the requests the simulated servers record.
 *
 * The node is set up as a real one (startBenchNode): N parents in kube-system with two secrets and
 * one configmap each, N/2 pods that are no parents, the kubelet on HTTPS asking for client
 * certificates, the runtime on a CRI unix socket, the API server on HTTP/2 sending each watch a
 * BOOKMARK a minute, and the node's clock running in real time (the kubelet relists every second
 * and collects dead containers once a minute). The simulated servers run in the bench's process;
 * the daemon's CPU is read from its own process only.
 *
 * In order, one daemon per node: its first pass on an empty node; a window at rest (after the
 * first refresh of the stored files, a minute after the first pass); secret
 * changes until each is in its stored file; API losses (the port closed, every connection cut,
 * every pod stopped) until every active manifest is in the static-pod dir, each followed by the
 * control plane's return and the withdrawal of the copies; parents stopped during an outage (the
 * API server lost first, then, at a random moment of the poll interval, one parent's containers
 * stopped in the runtime) until that parent's active manifest is in the static-pod dir; and CPU
 * during an outage with every parent still running, and with every copy active.
 */
import { join } from "node:path";
import { podId } from "../lib/core/pod.ts";
import { manyParents } from "../lib/sim/control_plane.ts";
import { SimNode } from "../lib/sim/node.ts";
import type { SimApiServer } from "../lib/sim/apiserver.ts";
import { AGENT_MALLOC_ENV, agentDenoFlags } from "../scripts/permissions.ts";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
export const POLL_INTERVAL_MS = 5_000;
const SAMPLE_MS = 100;
/** How often the bench looks at the files the daemon writes. */
const WATCH_MS = 20;
/** Clock ticks per second of /proc/<pid>/stat (USER_HZ, 100 on every Linux build). */
const TICKS_PER_SECOND = 100;

/** How the simulated node differs from a real one's set-up (see the top of this file). */
export interface BenchNodeOptions {
  /** Pods on the node that are no parents; default half the parents. */
  unrelatedPods?: number;
  /** How often each watch gets a BOOKMARK; default a minute, as kube-apiserver sends them. */
  bookmarkIntervalMs?: number;
  /** false: the API server speaks HTTP/1.1 only. */
  http2?: boolean;
  /** false: the node's clock stands still but for the bench's own changes. */
  clockRuns?: boolean;
}

/** The kubelet relists this often while the node's clock runs. */
const TICK_MS = 1_000;

/** A simulated node with `n` parents set up as the top of this file says; `stop` ends it. */
export async function startBenchNode(
  n: number,
  opts: BenchNodeOptions = {},
): Promise<{ node: SimNode; stop: () => Promise<void> }> {
  const cluster = manyParents("cp-1", n, opts.unrelatedPods ?? Math.floor(n / 2));
  const node = await SimNode.start({
    cluster,
    apiServer: {
      bookmarkIntervalMs: opts.bookmarkIntervalMs ?? 60_000,
      http2: opts.http2 ?? true,
    },
  });
  // One tick at a time: a tick that outlasts its interval delays the next. A tick that failed
  // fails the bench when it stops, not at once from an unhandled rejection.
  let ticks = Promise.resolve();
  let failure: unknown;
  const timer = opts.clockRuns === false ? undefined : setInterval(() => {
    ticks = ticks.then(() => node.advance(TICK_MS)).catch((e) => failure ??= e);
  }, TICK_MS);
  return {
    node,
    stop: async () => {
      clearInterval(timer);
      await ticks;
      await node.close();
      if (failure !== undefined) throw failure;
    },
  };
}

export interface DaemonBenchOptions {
  node: BenchNodeOptions;
  /** The window at rest, in which CPU and API requests are counted. */
  restSeconds: number;
  /** After the first pass and before the window: passes that may still be settling. */
  settleSeconds: number;
  lossRounds: number;
  /** Parents stopped at a random moment during an outage, one per round. */
  stopRounds: number;
  /** Each window of CPU during an outage; 0: not measured. */
  outageSeconds: number;
  secretRounds: number;
  /** How long a secret change or an activation may take before the bench gives up on it. */
  giveUpSeconds: number;
}

/** Kilobytes, as /proc/<pid>/status gives them. */
export interface MemorySample {
  /** VmRSS = RssAnon + RssFile + RssShmem. */
  rss: number;
  /** Heaps, stacks, V8's pages. */
  anon: number;
  /** Mostly the deno executable's own pages, shared with every deno process. */
  file: number;
}

const ZERO: MemorySample = { rss: 0, anon: 0, file: 0 };

export function memoryOf(pid: number): MemorySample | undefined {
  try {
    const status = Deno.readTextFileSync(`/proc/${pid}/status`);
    const field = (name: string) =>
      Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1]);
    return { rss: field("VmRSS"), anon: field("RssAnon"), file: field("RssFile") };
  } catch {
    return undefined; // exited meanwhile
  }
}

/** User and system CPU seconds of every thread of the process so far. */
function cpuSeconds(pid: number): number {
  // The command name, in parentheses, may hold spaces: fields count from after it.
  const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
}

/** The largest of each figure among samples taken every SAMPLE_MS, overall and per phase. */
class MemoryWatch {
  readonly max: MemorySample = { ...ZERO };
  #phase: MemorySample = { ...ZERO };
  readonly #timer: ReturnType<typeof setInterval>;

  constructor(pid: number) {
    this.#timer = setInterval(() => {
      const sample = memoryOf(pid);
      if (!sample) return;
      for (const key of Object.keys(ZERO) as (keyof MemorySample)[]) {
        this.max[key] = Math.max(this.max[key], sample[key]);
        this.#phase[key] = Math.max(this.#phase[key], sample[key]);
      }
    }, SAMPLE_MS);
  }

  /** The maxima since the last call. */
  phase(): MemorySample {
    const phase = this.#phase;
    this.#phase = { ...ZERO };
    return phase;
  }

  stop() {
    clearInterval(this.#timer);
  }
}

/**
 * The watches the simulated API server has open, when it counts them (as `watchesOpen`, a
 * number or a function), else undefined.
 */
export function watchesOpen(api: SimApiServer): number | undefined {
  const count = (api as unknown as { watchesOpen?: unknown }).watchesOpen;
  if (typeof count === "function") return Number(count.call(api));
  return typeof count === "number" ? count : undefined;
}

function sleep(ms: number) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Seconds until `done()` holds, looked at every WATCH_MS; undefined after `giveUpS`. */
async function secondsUntil(done: () => boolean, giveUpS: number): Promise<number | undefined> {
  const start = performance.now();
  while (!done()) {
    if (performance.now() - start > giveUpS * 1000) return undefined;
    await sleep(WATCH_MS);
  }
  return (performance.now() - start) / 1000;
}

/** The checkpoint manifests (.json) in a manifest dir; 0 while it does not exist. */
export function jsonFiles(dir: string): number {
  try {
    let n = 0;
    for (const entry of Deno.readDirSync(dir)) if (entry.name.endsWith(".json")) n++;
    return n;
  } catch {
    return 0;
  }
}

function readOr(path: string): string | undefined {
  try {
    return Deno.readTextFileSync(path);
  } catch {
    return undefined;
  }
}

/** The stored file of one key of a secret, wherever the checkpoint's layout put it. */
function findStoredFile(dir: string, secret: string, key: string): string | undefined {
  for (const entry of Deno.readDirSync(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory) {
      if (entry.name === secret && readOr(join(path, key)) !== undefined) return join(path, key);
      const found = findStoredFile(path, secret, key);
      if (found) return found;
    }
  }
  return undefined;
}

/** Polls a minute at the bench's poll interval. */
export const POLLS_PER_MINUTE = 60_000 / POLL_INTERVAL_MS;

export interface CpuFigures {
  seconds: number;
  cpuSeconds: number;
  cpuPerMinute: number;
}

export interface RestFigures extends CpuFigures {
  apiRequestsPerMinute: number;
  kubeletRequestsPerMinute: number;
  /** Connections the API server and the kubelet accepted in the window, per minute. */
  apiConnectionsPerMinute: number;
  kubeletConnectionsPerMinute: number;
  watchesOpen: number | undefined;
  memory: MemorySample;
}

/** The watches' set-up after the first pass, watched through the settle. */
export interface SetupFigures {
  /** From the first pass's end until every watch (the pods' and each object's) was open;
   *  undefined if they were not all open by the end of the settle. */
  watchesOpenSeconds: number | undefined;
  watchesWanted: number;
  /** API requests per minute in the first SETUP_WINDOW_S seconds after the first pass (or the
   *  settle, if shorter), and those requests by verb. */
  windowSeconds: number;
  apiRequestsPerMinute: number;
  byVerb: { list: number; get: number; watch: number; other: number };
}

/** The window after the first pass in which the set-up's requests are counted. */
const SETUP_WINDOW_S = 120;

export interface DaemonFigures {
  parents: number;
  /** From the spawn of the process until every parent's checkpoint manifest is on disk. */
  firstPassSeconds: number;
  setup: SetupFigures;
  rest: RestFigures;
  /** Each round's time, undefined where the bench gave up. */
  secretToFileSeconds: (number | undefined)[];
  apiLoss: {
    /** Until the first active manifest, and until all of them, were in the static-pod dir. */
    firstSeconds: (number | undefined)[];
    allSeconds: (number | undefined)[];
    /** From the control plane's return until every copy was withdrawn. */
    withdrawnSeconds: (number | undefined)[];
  };
  /** A parent stopped at a random moment after the API server was lost, per round: from the stop
   *  until its active manifest was in the static-pod dir; then from the API server's return (and
   *  the parent's) until it was withdrawn. */
  parentStop: {
    toActiveSeconds: (number | undefined)[];
    withdrawnSeconds: (number | undefined)[];
  };
  /** CPU during an outage: every parent still running; every copy active. */
  outage: { parentsRunning?: CpuFigures; allActive?: CpuFigures };
  /** Maxima over the whole run, and per phase. */
  memory: {
    max: MemorySample;
    firstPass: MemorySample;
    rest: MemorySample;
    changes: MemorySample;
  };
}

/** The daemon with `n` parents, measured as the top of this file says. */
export async function benchDaemon(n: number, opts: DaemonBenchOptions): Promise<DaemonFigures> {
  const { node, stop } = await startBenchNode(n, opts.node);
  try {
    const config = node.config({ pollIntervalMs: POLL_INTERVAL_MS });
    const configFile = await node.writeConfigFile({ pollIntervalMs: POLL_INTERVAL_MS });
    const giveUp = opts.giveUpSeconds;
    const spawnedAt = performance.now();
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", ...agentDenoFlags(), MAIN, "run", "--config", configFile],
      env: AGENT_MALLOC_ENV,
      stdout: "null",
      stderr: "null",
    }).spawn();
    const memory = new MemoryWatch(child.pid);
    let exited = false;
    const status = child.status.finally(() => exited = true);
    const alive = (done: () => boolean) => () => {
      if (exited) throw new Error("the daemon exited");
      return done();
    };
    try {
      // The first pass: every parent's manifest in the inactive dir.
      const firstDone = await secondsUntil(
        alive(() => jsonFiles(config.inactiveDir) >= n),
        giveUp + n / 10,
      );
      if (firstDone === undefined) {
        throw new Error("the first pass did not checkpoint every parent");
      }
      const firstPassSeconds = (performance.now() - spawnedAt) / 1000;
      const firstPass = memory.phase();
      // Every object the parents use and the node's pods: each one watch.
      // Each parent's two secrets and configmap, the shared kube-root-ca.crt, the node's pods.
      const setup = await settle(
        node,
        3 * n + 2,
        opts.settleSeconds,
      );
      // The first refresh, refreshInterval after the first pass, checks every stored file once
      // against the objects it was made from (at 1,000 parents about a second of CPU): start-up
      // work, not rest. The window at rest opens two polls after it is due.
      const pastFirstRefresh = spawnedAt + firstPassSeconds * 1000 + config.refreshIntervalMs +
        2 * POLL_INTERVAL_MS;
      await sleep(Math.max(0, pastFirstRefresh - performance.now()));
      memory.phase();

      const rest = await atRest(node, child.pid, opts.restSeconds, memory);

      const secretToFileSeconds: (number | undefined)[] = [];
      const secret = "component-0000-credentials", key = "token";
      const stored = findStoredFile(config.secretsDir, secret, key);
      if (!stored) throw new Error(`no stored file of ${secret}/${key}`);
      for (let round = 1; round <= opts.secretRounds; round++) {
        const value = `changed ${round} at ${Date.now()}`;
        node.apiServer.setSecret("kube-system", secret, {
          [key]: value,
          username: "system:component-0000",
        });
        const took = await secondsUntil(alive(() => readOr(stored) === value), giveUp);
        secretToFileSeconds.push(took);
        if (took === undefined) break;
      }

      const active = () => jsonFiles(config.staticPodDir);
      /** The control plane back: seconds until every copy was withdrawn. */
      const restored = async () => {
        await node.restoreControlPlane();
        return await secondsUntil(alive(() => active() === 0), giveUp);
      };
      const apiLoss = { firstSeconds: [], allSeconds: [], withdrawnSeconds: [] } as DaemonFigures[
        "apiLoss"
      ];
      for (let round = 0; round < opts.lossRounds; round++) {
        // At any moment of the poll interval, not just after the pass that saw the last return.
        await sleep(Math.random() * POLL_INTERVAL_MS);
        const lostAt = performance.now();
        await node.loseControlPlane("down");
        const first = await secondsUntil(alive(() => active() >= 1), giveUp);
        const all = first === undefined
          ? undefined
          : await secondsUntil(alive(() => active() >= n), giveUp);
        apiLoss.firstSeconds.push(first === undefined ? undefined : first);
        apiLoss.allSeconds.push(
          all === undefined ? undefined : (performance.now() - lostAt) / 1000,
        );
        const withdrawn = await restored();
        apiLoss.withdrawnSeconds.push(withdrawn);
        if (all === undefined || withdrawn === undefined) break;
      }
      const parentStop = { toActiveSeconds: [], withdrawnSeconds: [] } as DaemonFigures[
        "parentStop"
      ];
      for (let round = 0; round < opts.stopRounds; round++) {
        const id = podId(node.parents[round % n]);
        await node.loseApiServer("down");
        await sleep(Math.random() * POLL_INTERVAL_MS);
        const stoppedAt = performance.now();
        await node.stopParent(id);
        const took = await secondsUntil(alive(() => active() >= 1), giveUp);
        parentStop.toActiveSeconds.push(
          took === undefined ? undefined : (performance.now() - stoppedAt) / 1000,
        );
        const withdrawn = await restored();
        parentStop.withdrawnSeconds.push(withdrawn);
        if (took === undefined || withdrawn === undefined) break;
      }

      const outage: DaemonFigures["outage"] = {};
      if (opts.outageSeconds > 0) {
        await node.loseApiServer("down");
        outage.parentsRunning = await cpuOver(child.pid, opts.outageSeconds);
        await node.restoreControlPlane();
        await node.loseControlPlane("down");
        if (await secondsUntil(alive(() => active() >= n), giveUp) !== undefined) {
          outage.allActive = await cpuOver(child.pid, opts.outageSeconds);
        }
        await restored();
      }
      const changes = memory.phase();
      return {
        parents: n,
        firstPassSeconds,
        setup,
        rest,
        secretToFileSeconds,
        apiLoss,
        parentStop,
        outage,
        memory: { max: { ...memory.max }, firstPass, rest: rest.memory, changes },
      };
    } finally {
      memory.stop();
      if (!exited) child.kill("SIGTERM");
      await status;
    }
  } finally {
    await stop();
  }
}

/** The process's CPU over the next `seconds`. */
async function cpuOver(pid: number, seconds: number): Promise<CpuFigures> {
  const before = cpuSeconds(pid), at = performance.now();
  await sleep(seconds * 1000);
  const minutes = (performance.now() - at) / 60_000;
  const cpu = cpuSeconds(pid) - before;
  return { seconds: minutes * 60, cpuSeconds: cpu, cpuPerMinute: cpu / minutes };
}

/** The settle after the first pass, measuring the watches' set-up in it. */
async function settle(node: SimNode, wanted: number, seconds: number): Promise<SetupFigures> {
  const api = node.apiServer;
  const start = performance.now(), requestsBefore = api.requests.length;
  const verbsBefore = api.requestsByVerb();
  const windowS = Math.min(SETUP_WINDOW_S, seconds);
  let requestsInWindow: number | undefined;
  let verbsInWindow = verbsBefore;
  let watchesOpenSeconds: number | undefined;
  for (;;) {
    const elapsedS = (performance.now() - start) / 1000;
    if (watchesOpenSeconds === undefined && (watchesOpen(api) ?? 0) >= wanted) {
      watchesOpenSeconds = elapsedS;
    }
    if (requestsInWindow === undefined && elapsedS >= windowS) {
      requestsInWindow = api.requests.length - requestsBefore;
      verbsInWindow = api.requestsByVerb();
    }
    if (elapsedS >= seconds) break;
    await sleep(SAMPLE_MS);
  }
  const byVerb = { ...verbsInWindow };
  for (const verb of Object.keys(byVerb) as (keyof typeof byVerb)[]) {
    byVerb[verb] -= verbsBefore[verb];
  }
  return {
    watchesOpenSeconds,
    watchesWanted: wanted,
    windowSeconds: windowS,
    apiRequestsPerMinute: (requestsInWindow ?? 0) / (windowS / 60),
    byVerb,
  };
}

/** CPU and requests over `seconds` in which nothing changes on the node. */
async function atRest(
  node: SimNode,
  pid: number,
  seconds: number,
  memory: MemoryWatch,
): Promise<RestFigures> {
  const api = node.apiServer, kubelet = node.kubelet.secure;
  const before = {
    api: api.requests.length,
    kubelet: kubelet.requests.length,
    apiConnections: api.connections().accepted,
    kubeletConnections: kubelet.connections().accepted,
  };
  const cpu = await cpuOver(pid, seconds);
  const minutes = cpu.seconds / 60;
  return {
    ...cpu,
    apiRequestsPerMinute: (api.requests.length - before.api) / minutes,
    kubeletRequestsPerMinute: (kubelet.requests.length - before.kubelet) / minutes,
    apiConnectionsPerMinute: (api.connections().accepted - before.apiConnections) / minutes,
    kubeletConnectionsPerMinute: (kubelet.connections().accepted - before.kubeletConnections) /
      minutes,
    watchesOpen: watchesOpen(api),
    memory: memory.phase(),
  };
}
