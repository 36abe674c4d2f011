/**
 * Node pass benchmark: the real agent against a simulated node on loopback (lib/sim/node.ts: API
 * server and kubelet over mTLS, a gRPC CRI runtime on a unix socket) with N parents of two secrets
 * and one configmap each. Figures go to docs/benchmarks.md, "Node pass", beside the targets they
 * are held to: a steady pass ≤ 50 ms at 100 parents and ≤ 400 ms at 1,000 writing nothing,
 * activation ≤ 100 ms, daemon RSS ≤ 120 MB at 1,000 parents.
 *
 *   deno task bench-pass [--parents 100,1000] [--skip-strace] [--skip-rss] [--rss-parents N]
 *                        [--v8-flags FLAGS] [--glibc-defaults] [--json FILE] [--cpu-profile FILE]
 *
 * For each N: the first pass (writes everything), steady passes (timed; nothing may be written,
 * checked by the pass report, by a listing of every file's times, and by strace), a refresh pass
 * (every secret and configmap fetched again), and activation after losing the control plane.
 * Then the RSS of the real daemon (`main.ts run`) with the largest N. The agent always runs in
 * a process of its own (bench/pass_agent.ts); the simulated servers stay in this one.
 */
import { join } from "node:path";
import { parseArgs } from "node:util";
import { manyParents } from "../lib/sim/control_plane.ts";
import { SimNode } from "../lib/sim/node.ts";
import { AGENT_MALLOC_ENV, AGENT_V8_FLAGS } from "../scripts/permissions.ts";
import { type AgentAnswer, type AgentRequest, lines, type PassTiming } from "./pass_protocol.ts";
import { listTree, straceArgs, treeChanges, writesBetween } from "./pass_writes.ts";

const { values: flags } = parseArgs({
  args: Deno.args,
  options: {
    parents: { type: "string", default: "100,1000" },
    "skip-strace": { type: "boolean", default: false },
    "skip-rss": { type: "boolean", default: false },
    /** Parents on the node the daemon's memory is measured with. */
    "rss-parents": { type: "string", default: "1000" },
    /** V8 flags of the agent processes, timed or measured; by default the compiled binary's
     *  (scripts/permissions.ts), "" for none, e.g. "--optimize-for-size" to try others. */
    "v8-flags": { type: "string", default: AGENT_V8_FLAGS.map((f) => f.flag).join(",") },
    /** Run the agents with glibc's own allocator settings instead of the unit's. */
    "glibc-defaults": { type: "boolean", default: false },
    /** Daemon passes to watch for the RSS figure. */
    "rss-passes": { type: "string", default: "12" },
    json: { type: "string" },
    /** A V8 CPU profile of the steady passes with the largest N, for finding where time goes. */
    "cpu-profile": { type: "string" },
  },
});
/** `--parents ""` measures only the daemon's memory. */
const PARENT_COUNTS = flags.parents === "" ? [] : flags.parents.split(",").map(Number);
/** Steady passes timed: at least 20 with 100 parents and 10 with 1,000, for a stable median. */
const steadyPassCount = (n: number) => (n <= 100 ? 30 : 15);
const TRACED_PASSES = 5;
const ACTIVATION_ROUNDS = 5;
const RSS_PASSES = Number(flags["rss-passes"]);
const SAMPLE_MS = 100;
/** A pass of the agent under test ends long before this, even with 1,000 parents under strace. */
const ANSWER_TIMEOUT_MS = 300_000;
/** No refresh of secrets and configmaps falls due while steady passes are measured. */
const STEADY = ["--refresh-interval", "24h"];
const AGENT_SCRIPT = new URL("./pass_agent.ts", import.meta.url).pathname;
const MAIN = new URL("../main.ts", import.meta.url).pathname;

// ---------------------------------------------------------------- statistics

/** Nearest-rank percentile of sorted samples. */
function percentile(sorted: number[], p: number): number {
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)];
}

interface Summary {
  n: number;
  median: number;
  p90: number;
  min: number;
  max: number;
}

function summarize(samples: number[]): Summary {
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    n: sorted.length,
    median: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    min: sorted[0],
    max: sorted.at(-1)!,
  };
}

const ms = (x: number) => `${x.toFixed(1)} ms`;
const show = (s: Summary) =>
  `median ${ms(s.median)}, p90 ${ms(s.p90)}, min ${ms(s.min)}, max ${ms(s.max)} (${s.n})`;

// ---------------------------------------------------------------- the agent process

interface AgentProcessOptions {
  /** Run the agent under strace, logging to this file. */
  straceLog?: string;
  /** Profile the agent's passes after the first (see pass_agent.ts) into this file. */
  cpuProfile?: string;
}

class AgentProcess {
  readonly #child: Deno.ChildProcess;
  readonly #answers: AsyncGenerator<string>;
  readonly #stdin: WritableStreamDefaultWriter<Uint8Array>;

  constructor(configFile: string, extraFlags: string[], opts: AgentProcessOptions) {
    const { straceLog } = opts;
    const v8Flags = flags["v8-flags"];
    const agent = [
      Deno.execPath(),
      "run",
      "--allow-all",
      ...(v8Flags ? [`--v8-flags=${v8Flags}`] : []),
      AGENT_SCRIPT,
      "--config",
      configFile,
    ];
    const argv = straceLog ? ["strace", ...straceArgs(straceLog), ...agent] : agent;
    this.#child = new Deno.Command(argv[0], {
      args: [...argv.slice(1), ...extraFlags],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
      env: {
        ...(flags["glibc-defaults"] ? {} : AGENT_MALLOC_ENV),
        ...(opts.cpuProfile ? { CKPT_BENCH_CPU_PROFILE: opts.cpuProfile } : {}),
      },
    }).spawn();
    this.#answers = lines(this.#child.stdout);
    this.#stdin = this.#child.stdin.getWriter();
  }

  async #ask(request: AgentRequest): Promise<Extract<AgentAnswer, { ok: true }>> {
    await this.#stdin.write(new TextEncoder().encode(`${JSON.stringify(request)}\n`));
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error("the agent did not answer")), ANSWER_TIMEOUT_MS);
    });
    try {
      const next = await Promise.race([this.#answers.next(), timeout]);
      if (next.done) throw new Error("the agent process ended");
      const answer = JSON.parse(next.value) as AgentAnswer;
      if (!answer.ok) throw new Error(`the agent failed: ${answer.error}`);
      return answer;
    } finally {
      clearTimeout(timer);
    }
  }

  async pass(): Promise<PassTiming> {
    return (await this.#ask({ cmd: "pass" })).timing!;
  }

  async mark(path: string): Promise<void> {
    await this.#ask({ cmd: "mark", path });
  }

  /** Closing stdin ends the agent: it releases its lock and exits. */
  async close(): Promise<void> {
    await this.#stdin.close();
    const status = await this.#child.status;
    if (!status.success) throw new Error(`the agent process exited with ${status.code}`);
  }
}

async function withAgent<T>(
  configFile: string,
  extraFlags: string[],
  work: (agent: AgentProcess) => Promise<T>,
  opts: AgentProcessOptions = {},
): Promise<T> {
  const agent = new AgentProcess(configFile, extraFlags, opts);
  try {
    return await work(agent);
  } finally {
    await agent.close();
  }
}

function appliedText(timing: PassTiming): string {
  const parts = Object.entries(timing.applied).map(([op, n]) => `${n} ${op}`);
  return parts.length ? parts.join(", ") : "none";
}

function requireComplete(what: string, timing: PassTiming) {
  if (!timing.complete) throw new Error(`${what}: incomplete pass: ${timing.errors.join("; ")}`);
}

// ---------------------------------------------------------------- measurements

interface SteadyResult {
  firstPass: { wallMs: number; applied: Record<string, number>; bytesWritten: number };
  steady: Summary;
  observed: Summary;
  answered: { apiserver: Summary; kubelet: Summary; runtime: Summary };
  cpu: Summary;
  bytesWritten: number;
  appliedActions: number;
  filesChanged: string[];
}

/** The first pass on a fresh node, then steady passes with nothing to refresh. */
async function measureSteady(
  node: SimNode,
  configFile: string,
  n: number,
  cpuProfile?: string,
): Promise<SteadyResult> {
  return await withAgent(configFile, STEADY, async (agent) => {
    const first = await agent.pass();
    requireComplete("first pass", first);
    console.log(
      `  first pass (writes every checkpoint): ${ms(first.wallMs)}; applied ${
        appliedText(first)
      }; ${first.bytesWritten} bytes of volume files`,
    );
    const before = await listTree(node.root);
    const timings: PassTiming[] = [];
    for (let i = 0; i < steadyPassCount(n); i++) {
      const timing = await agent.pass();
      requireComplete("steady pass", timing);
      timings.push(timing);
    }
    const filesChanged = treeChanges(before, await listTree(node.root));
    const result: SteadyResult = {
      firstPass: { wallMs: first.wallMs, applied: first.applied, bytesWritten: first.bytesWritten },
      steady: summarize(timings.map((t) => t.wallMs)),
      observed: summarize(timings.map((t) => t.observedMs)),
      answered: {
        apiserver: summarize(timings.map((t) => t.answeredMs.apiserver)),
        kubelet: summarize(timings.map((t) => t.answeredMs.kubelet)),
        runtime: summarize(timings.map((t) => t.answeredMs.runtime)),
      },
      cpu: summarize(timings.map((t) => t.cpuMs)),
      bytesWritten: timings.reduce((sum, t) => sum + t.bytesWritten, 0),
      appliedActions: timings.reduce(
        (sum, t) => sum + Object.values(t.applied).reduce((a, b) => a + b, 0),
        0,
      ),
      filesChanged,
    };
    console.log(`  steady pass: ${show(result.steady)}`);
    console.log(`    observation complete: ${show(result.observed)}`);
    for (const [source, summary] of Object.entries(result.answered)) {
      console.log(`      ${source} answered: ${show(summary)}`);
    }
    console.log(`    agent CPU time (all threads): ${show(result.cpu)}`);
    console.log(
      `    bytesWritten ${result.bytesWritten}, applied actions ${result.appliedActions}, ` +
        `files changed ${filesChanged.length}`,
    );
    for (const change of filesChanged.slice(0, 10)) console.log(`    ${change}`);
    return result;
  }, { cpuProfile });
}

/** A new agent's first pass: every secret and configmap fetched again, nothing changed. */
async function refreshPass(node: SimNode, configFile: string) {
  return await withAgent(configFile, STEADY, async (agent) => {
    const requestsBefore = node.apiServer.requests.length;
    const connectionsBefore = node.apiServer.connections().accepted;
    const timing = await agent.pass();
    requireComplete("refresh pass", timing);
    const requests = node.apiServer.requests.length - requestsBefore;
    const connections = node.apiServer.connections().accepted - connectionsBefore;
    console.log(
      `  refresh pass (fetch every object, write what differs): ${ms(timing.wallMs)}; ` +
        `applied ${appliedText(timing)}; ${timing.bytesWritten} bytes; ` +
        `${requests} API requests over ${connections} connections`,
    );
    return {
      wallMs: timing.wallMs,
      applied: timing.applied,
      bytesWritten: timing.bytesWritten,
      apiRequests: requests,
      apiConnections: connections,
    };
  });
}

/** Steady passes under strace: the writing system calls under the node's root. */
async function tracedPasses(node: SimNode, configFile: string) {
  const log = await Deno.makeTempFile({ prefix: "ckpt-bench-strace-" });
  const from = join(node.root, ".bench-mark-start"), to = join(node.root, ".bench-mark-end");
  try {
    await withAgent(configFile, STEADY, async (agent) => {
      requireComplete("traced warm-up pass", await agent.pass());
      await agent.mark(from);
      for (let i = 0; i < TRACED_PASSES; i++) requireComplete("traced pass", await agent.pass());
      await agent.mark(to);
    }, { straceLog: log });
    const text = await Deno.readTextFile(log);
    if (!text.includes(`"${to}"`)) throw new Error("the strace log misses the end mark");
    const writes = writesBetween(text, node.root, from, to);
    // Proof that the trace sees writes: the agent wrote its pid into the lock file at start.
    const lockWrites = writesBetween(text, node.root, undefined, from)
      .filter((line) => line.includes(node.config().lockFile));
    if (lockWrites.length === 0) throw new Error("the trace shows no write of the lock file");
    console.log(
      `  strace over ${TRACED_PASSES} steady passes: ${writes.length} writing calls ` +
        `(check: ${lockWrites.length} seen while taking the lock at start)`,
    );
    for (const line of writes.slice(0, 10)) console.log(`    ${line}`);
    return { passes: TRACED_PASSES, writingCalls: writes.length, examples: writes.slice(0, 10) };
  } finally {
    await Deno.remove(log);
  }
}

/**
 * The control plane is lost (every pod stops, the API server is gone, the kubelet refuses);
 * the next pass activates every checkpoint. Then the control plane comes back and the next pass
 * withdraws them, for another round.
 */
async function activation(node: SimNode, configFile: string, n: number) {
  return await withAgent(configFile, STEADY, async (agent) => {
    requireComplete("pass before the outage", await agent.pass());
    const rounds: PassTiming[] = [];
    for (let round = 0; round < ACTIVATION_ROUNDS; round++) {
      await node.loseControlPlane("down");
      const timing = await agent.pass();
      if (timing.startsDurableMs.length !== n) {
        throw new Error(`activated ${timing.startsDurableMs.length} of ${n}: ${timing.errors}`);
      }
      rounds.push(timing);
      await node.restoreControlPlane();
      const back = await agent.pass();
      requireComplete("pass after the outage", back);
      if (back.applied.stop !== n) throw new Error(`withdrew ${back.applied.stop ?? 0} of ${n}`);
    }
    const result = {
      rounds: ACTIVATION_ROUNDS,
      observed: summarize(rounds.map((t) => t.observedMs)),
      runtimeAnswered: summarize(rounds.map((t) => t.answeredMs.runtime)),
      firstDurable: summarize(rounds.map((t) => t.startsDurableMs[0])),
      firstAfterRuntimeAnswer: summarize(
        rounds.map((t) => t.startsDurableMs[0] - t.answeredMs.runtime),
      ),
      allDurable: summarize(rounds.map((t) => t.startsDurableMs.at(-1)!)),
      wall: summarize(rounds.map((t) => t.wallMs)),
    };
    console.log(`  activation, from the start of the pass (${ACTIVATION_ROUNDS} rounds):`);
    console.log(`    runtime answered:            ${show(result.runtimeAnswered)}`);
    console.log(`    observation complete:        ${show(result.observed)}`);
    console.log(`    first active manifest durable: ${show(result.firstDurable)}`);
    console.log(`      after the runtime's answer:  ${show(result.firstAfterRuntimeAnswer)}`);
    console.log(`    all ${n} active manifests durable: ${show(result.allDurable)}`);
    return result;
  });
}

// ---------------------------------------------------------------- memory

/** Kilobytes, as /proc/<pid>/status gives them. */
interface MemorySample {
  /** VmRSS = RssAnon + RssFile + RssShmem. */
  rss: number;
  /** Anonymous memory: heaps, stacks. */
  anon: number;
  /** File-backed pages: mostly the deno executable's own code, shared with every deno process. */
  file: number;
  /** VmHWM: the peak RSS the kernel saw. */
  hwm: number;
}

interface Memory {
  /** The largest of each figure among the samples (taken every SAMPLE_MS). */
  max: MemorySample;
  last: MemorySample;
}

async function memoryOf(pid: number): Promise<MemorySample | undefined> {
  try {
    const status = await Deno.readTextFile(`/proc/${pid}/status`);
    const field = (name: string) =>
      Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1]);
    return {
      rss: field("VmRSS"),
      anon: field("RssAnon"),
      file: field("RssFile"),
      hwm: field("VmHWM"),
    };
  } catch {
    return undefined; // exited meanwhile
  }
}

/** Samples a process's memory until `until` resolves; the last sample is taken after it. */
async function sampleMemory(pid: number, until: Promise<unknown>): Promise<Memory> {
  const zero = { rss: 0, anon: 0, file: 0, hwm: 0 };
  const memory: Memory = { max: { ...zero }, last: { ...zero } };
  let done = false;
  until.finally(() => done = true);
  while (true) {
    const sample = await memoryOf(pid);
    if (sample) {
      for (const key of Object.keys(zero) as (keyof MemorySample)[]) {
        memory.max[key] = Math.max(memory.max[key], sample[key]);
      }
      memory.last = sample;
    }
    if (done) return memory;
    await new Promise((resolve) => setTimeout(resolve, SAMPLE_MS));
  }
}

const mb = (kb: number) => `${(kb / 1024).toFixed(1)} MB`;
/** VmHWM is the peak since the process started: not shown for a window that starts later. */
const showMemory = (m: Memory, withPeak = true) =>
  `max RSS ${mb(m.max.rss)} (anon ${mb(m.max.anon)}, file ${mb(m.max.file)}), ` +
  `${withPeak ? `VmHWM ${mb(m.max.hwm)}, ` : ""}last RSS ${mb(m.last.rss)}`;

/** Deno's own footprint: a script that only waits. */
async function denoBaseline(): Promise<Memory> {
  const script = await Deno.makeTempFile({ suffix: ".ts" });
  try {
    await Deno.writeTextFile(script, "await new Promise((r) => setTimeout(r, 1500));\n");
    const child = new Deno.Command(Deno.execPath(), { args: ["run", script] }).spawn();
    return await sampleMemory(child.pid, child.status);
  } finally {
    await Deno.remove(script);
  }
}

function sleep(ms: number) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * `ckpt-agent run` as a subprocess against `node` (poll interval 1 s), sampled from its start
 * through its first pass (which writes every checkpoint) until `passes` more passes have listed
 * the node's pods; stopped with SIGTERM. `steady` covers only the passes after the first.
 */
async function daemonMemory(node: SimNode, passes: number) {
  const configFile = await node.writeConfigFile();
  const listPath = "/api/v1/pods";
  const v8Flags = flags["v8-flags"];
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-all",
      ...(v8Flags ? [`--v8-flags=${v8Flags}`] : []),
      MAIN,
      "run",
      "--config",
      configFile,
    ],
    stdout: "null",
    stderr: "null",
  }).spawn();
  const listsBefore = node.apiServer.requestCount(listPath);
  const lists = () => node.apiServer.requestCount(listPath) - listsBefore;
  // The first pass writes every checkpoint and can take tens of seconds; later ones take about
  // a second and a half each, poll interval included.
  const deadline = Date.now() + 120_000 + passes * 5_000;
  const waitForLists = async (count: number) => {
    while (lists() < count) {
      if (Date.now() > deadline) throw new Error("the daemon did not pass often enough");
      await sleep(200);
    }
  };
  const firstPassDone = waitForLists(2);
  const whole = sampleMemory(child.pid, waitForLists(passes + 1).catch(() => {}));
  await firstPassDone.catch(() => {});
  const steady = await sampleMemory(child.pid, waitForLists(passes + 1).catch(() => {}));
  const all = await whole;
  child.kill("SIGTERM");
  const status = await child.status;
  await waitForLists(passes + 1);
  if (!status.success) throw new Error(`the daemon exited with ${status.code}`);
  return { all, steady, passes: lists(), v8Flags };
}

// ---------------------------------------------------------------- main

async function benchParents(n: number) {
  console.log(`\n${n} parents (2 secrets + 1 configmap each)`);
  const node = await SimNode.start({ cluster: manyParents("cp-1", n) });
  try {
    const configFile = await node.writeConfigFile();
    const profile = n === Math.max(...PARENT_COUNTS) ? flags["cpu-profile"] : undefined;
    const steady = await measureSteady(node, configFile, n, profile);
    const refresh = await refreshPass(node, configFile);
    const traced = flags["skip-strace"] ? undefined : await tracedPasses(node, configFile);
    const activated = await activation(node, configFile, n);
    return { parents: n, ...steady, refresh, strace: traced, activation: activated };
  } finally {
    await node.close();
  }
}

async function benchMemory(n: number) {
  const baseline = await denoBaseline();
  console.log(`\nDeno baseline (a script that waits): ${showMemory(baseline)}`);
  const small = await SimNode.start();
  let idle;
  try {
    idle = await daemonMemory(small, RSS_PASSES);
  } finally {
    await small.close();
  }
  console.log(`daemon, demo control plane (3 parents), ${idle.passes} passes:`);
  console.log(`  whole run:   ${showMemory(idle.all)}`);
  console.log(`  after pass 1: ${showMemory(idle.steady, false)}`);
  const node = await SimNode.start({ cluster: manyParents("cp-1", n) });
  try {
    const daemon = await daemonMemory(node, RSS_PASSES);
    console.log(`daemon, ${n} parents from an empty node, ${daemon.passes} passes:`);
    console.log(`  whole run:   ${showMemory(daemon.all)}`);
    console.log(`  after pass 1: ${showMemory(daemon.steady, false)}`);
    return { parents: n, baseline, demoControlPlane: idle, daemon };
  } finally {
    await node.close();
  }
}

const loadBefore = Deno.loadavg();
console.log(`load average before: ${loadBefore.join(" ")}; ${navigator.hardwareConcurrency} CPUs`);
console.log(`agent V8 flags: ${flags["v8-flags"] || "(none)"}`);
const results = [];
for (const n of PARENT_COUNTS) results.push(await benchParents(n));
const memory = flags["skip-rss"] ? undefined : await benchMemory(Number(flags["rss-parents"]));
const loadAfter = Deno.loadavg();
console.log(`\nload average after: ${loadAfter.join(" ")}`);
if (flags.json) {
  await Deno.writeTextFile(
    flags.json,
    JSON.stringify({ loadBefore, loadAfter, results, memory }, null, 2),
  );
}
