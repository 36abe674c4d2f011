/**
 * Node benchmark: the real agent against a simulated node on loopback (lib/sim/node.ts: API
 * server and kubelet over mTLS, a gRPC CRI runtime on a unix socket) with N parents of two secrets
 * and one configmap each, set up as bench/daemon_bench.ts says. Each figure is printed beside its
 * target (bench/targets.ts) and, when missed, by how much; docs/benchmarks.md, "Node pass", has
 * the figures and why targets are missed.
 *
 *   deno task bench-pass [--parents 10,100,1000] [--rest-seconds 60] [--settle-seconds 10]
 *                        [--loss-rounds 5] [--stop-rounds 5] [--outage-seconds 30]
 *                        [--secret-rounds 3] [--give-up-seconds 70]
 *                        [--unrelated-pods N] [--bookmark-interval-seconds 60] [--http1]
 *                        [--still-clock]
 *                        [--skip-passes] [--skip-strace] [--v8-flags FLAGS] [--glibc-defaults]
 *                        [--json FILE] [--cpu-profile FILE]
 *
 * A quick run: `--parents 10 --rest-seconds 20 --settle-seconds 5`.
 *
 * For each N, first the daemon as a node runs it (bench/daemon_bench.ts): `main.ts run` with the
 * unit's flags, its first pass on an empty node, CPU per minute and API requests per minute at
 * rest, RSS (anon / file), secret changes until their stored files, API losses until every
 * active manifest. Then, unless `--skip-passes`, the cost of one pass (bench/pass_agent.ts runs
 * the agent's passes on request): steady passes timed, and proof that they write nothing.
 */
import { join } from "node:path";
import { parseArgs } from "node:util";
import { manyParents } from "../lib/sim/control_plane.ts";
import { SimNode } from "../lib/sim/node.ts";
import { AGENT_MALLOC_ENV, AGENT_V8_FLAGS, agentDenoFlags } from "../scripts/permissions.ts";
import {
  benchDaemon,
  type DaemonBenchOptions,
  type DaemonFigures,
  memoryOf,
  type MemorySample,
  POLLS_PER_MINUTE,
} from "./daemon_bench.ts";
import { judge, type Verdict, verdictLine } from "./targets.ts";
import { calibrationMs } from "./calibration.ts";
import { type AgentAnswer, type AgentRequest, lines, type PassTiming } from "./pass_protocol.ts";
import { listTree, straceArgs, treeChanges, writesBetween } from "./pass_writes.ts";

const { values: flags } = parseArgs({
  args: Deno.args,
  options: {
    parents: { type: "string", default: "10,100,1000" },
    /** The daemon's window at rest, in which its CPU and API requests are counted. */
    "rest-seconds": { type: "string", default: "60" },
    /** Between the daemon's watches' set-up and the window at rest, at least; the window also
     *  waits until two polls after the first refresh is due (bench/daemon_bench.ts). */
    "settle-seconds": { type: "string", default: "10" },
    "loss-rounds": { type: "string", default: "5" },
    /** Parents stopped at a random moment during an outage, one per round. */
    "stop-rounds": { type: "string", default: "5" },
    /** Each window of CPU during an outage (parents running; every copy active); 0: none. */
    "outage-seconds": { type: "string", default: "30" },
    /** Pods on the node that are no parents; default half the parents. */
    "unrelated-pods": { type: "string" },
    "bookmark-interval-seconds": { type: "string", default: "60" },
    /** The API server on HTTP/1.1 only. */
    http1: { type: "boolean", default: false },
    /** The node's clock stands still between the bench's changes (no relist, no container GC). */
    "still-clock": { type: "boolean", default: false },
    "secret-rounds": { type: "string", default: "3" },
    /** How long a secret change or an activation may take before it counts as never. */
    "give-up-seconds": { type: "string", default: "70" },
    /** Only the daemon's figures, not the cost of one pass. */
    "skip-passes": { type: "boolean", default: false },
    "skip-strace": { type: "boolean", default: false },
    /** V8 flags of the pass agent; by default the compiled binary's (scripts/permissions.ts),
     *  "" for none, e.g. "--optimize-for-size" to try others. The daemon always runs with the
     *  unit's. */
    "v8-flags": { type: "string", default: AGENT_V8_FLAGS.map((f) => f.flag).join(",") },
    /** Run the pass agent with glibc's own allocator settings instead of the unit's. */
    "glibc-defaults": { type: "boolean", default: false },
    json: { type: "string" },
    /** A V8 CPU profile of the steady passes with the largest N, for finding where time goes. */
    "cpu-profile": { type: "string" },
  },
});
const PARENT_COUNTS = flags.parents.split(",").map(Number);
const DAEMON: DaemonBenchOptions = {
  node: {
    ...(flags["unrelated-pods"] !== undefined
      ? { unrelatedPods: Number(flags["unrelated-pods"]) }
      : {}),
    bookmarkIntervalMs: Number(flags["bookmark-interval-seconds"]) * 1000,
    http2: !flags.http1,
    clockRuns: !flags["still-clock"],
  },
  restSeconds: Number(flags["rest-seconds"]),
  settleSeconds: Number(flags["settle-seconds"]),
  lossRounds: Number(flags["loss-rounds"]),
  stopRounds: Number(flags["stop-rounds"]),
  outageSeconds: Number(flags["outage-seconds"]),
  secretRounds: Number(flags["secret-rounds"]),
  giveUpSeconds: Number(flags["give-up-seconds"]),
};
/** Steady passes timed: at least 20 with 100 parents and 10 with 1,000, for a stable median. */
const steadyPassCount = (n: number) => (n <= 100 ? 30 : 15);
const TRACED_PASSES = 5;
/** A pass of the agent under test ends long before this, even with 1,000 parents under strace. */
const ANSWER_TIMEOUT_MS = 300_000;
/** No refresh of secrets and configmaps falls due while steady passes are measured. */
const STEADY = ["--refresh-interval", "24h"];
const AGENT_SCRIPT = new URL("./pass_agent.ts", import.meta.url).pathname;

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

// ---------------------------------------------------------------- main

const seconds = (s: number | undefined) => s === undefined ? "never" : `${s.toFixed(2)} s`;
const mib = (kb: number) => kb / 1024;
const memoryText = (m: MemorySample) =>
  `${mib(m.rss).toFixed(1)} MiB (anon ${mib(m.anon).toFixed(1)}, file ${mib(m.file).toFixed(1)})`;
/** Milliseconds of CPU per poll interval, at `cpuPerMinute` seconds a minute. */
const perPoll = (cpuPerMinute: number) => (cpuPerMinute * 1000 / POLLS_PER_MINUTE).toFixed(1);
/** `min / median / max of N`, of the rounds that ended. */
function minMedMax(rounds: (number | undefined)[]): string {
  const done = rounds.filter((r) => r !== undefined).sort((a, b) => a - b);
  if (done.length === 0) return "no round";
  const at = (p: number) => percentile(done, p).toFixed(2);
  return `min / med / max ${at(0)} / ${at(50)} / ${at(100)} s of ${done.length}`;
}
/** The worst of rounds, where a round the bench gave up on is worse than any. */
const worst = (rounds: (number | undefined)[]) =>
  rounds.length === 0 || rounds.includes(undefined) ? undefined : Math.max(...rounds as number[]);

/** The daemon's figures beside their targets. */
function daemonVerdicts(d: DaemonFigures): Verdict[] {
  const n = d.parents;
  const verdicts = [
    judge("firstPass", n, d.firstPassSeconds),
    judge("cpuPerMinute", n, d.rest.cpuPerMinute),
    judge("rss", n, mib(d.memory.max.rss)),
    judge("apiRequestsPerMinute", n, d.rest.apiRequestsPerMinute),
    judge("apiLossToActive", n, worst(d.apiLoss.allSeconds)),
    judge("parentStopToActive", n, worst(d.parentStop.toActiveSeconds)),
    judge("secretToFile", n, worst(d.secretToFileSeconds)),
  ];
  const details = [
    " from the process's start",
    ` (${d.rest.cpuSeconds.toFixed(2)} s over ${d.rest.seconds.toFixed(0)} s; ` +
    `${perPoll(d.rest.cpuPerMinute)} ms per poll)`,
    ` (anon ${mib(d.memory.max.anon).toFixed(1)}, file ${mib(d.memory.max.file).toFixed(1)}); ` +
    `at rest ${memoryText(d.memory.rest)}`,
    `; kubelet ${d.rest.kubeletRequestsPerMinute.toFixed(1)}/min; connections accepted, API ` +
    `server ${d.rest.apiConnectionsPerMinute.toFixed(1)}/min, kubelet ` +
    `${d.rest.kubeletConnectionsPerMinute.toFixed(1)}/min; watches open ${
      d.rest.watchesOpen ?? "n/a"
    }`,
    ` (rounds: ${d.apiLoss.allSeconds.map(seconds).join(", ")}; first manifest ${
      d.apiLoss.firstSeconds.map(seconds).join(", ")
    }; withdrawn after the return ${d.apiLoss.withdrawnSeconds.map(seconds).join(", ")})`,
    ` (${minMedMax(d.parentStop.toActiveSeconds)}; rounds: ${
      d.parentStop.toActiveSeconds.map(seconds).join(", ")
    }; withdrawn after the return ${d.parentStop.withdrawnSeconds.map(seconds).join(", ")})`,
    ` (rounds: ${d.secretToFileSeconds.map(seconds).join(", ")})`,
  ];
  verdicts.forEach((v, i) => console.log(`  ${verdictLine(v, details[i])}`));
  for (const [what, cpu] of Object.entries(d.outage)) {
    console.log(
      `  CPU per minute during an outage, ${
        what === "allActive" ? "every copy active" : "every parent running"
      }: ${cpu.cpuPerMinute.toFixed(3)} s (${cpu.cpuSeconds.toFixed(2)} s over ${
        cpu.seconds.toFixed(0)
      } s; ${perPoll(cpu.cpuPerMinute)} ms per poll interval; no target)`,
    );
  }
  const { setup } = d;
  console.log(
    `  watches' set-up after the first pass: all ${setup.watchesWanted} open after ${
      seconds(setup.watchesOpenSeconds)
    }; API requests in the first ${setup.windowSeconds} s: ${
      setup.apiRequestsPerMinute.toFixed(0)
    }/min (${Object.entries(setup.byVerb).map(([verb, count]) => `${verb} ${count}`).join(", ")})`,
  );
  return verdicts;
}

async function benchParents(n: number) {
  console.log(`\n${n} parents (2 secrets + 1 configmap each)`);
  console.log(`the daemon (main.ts run, the unit's flags, poll interval 5 s):`);
  const daemon = await benchDaemon(n, DAEMON);
  const verdicts = daemonVerdicts(daemon);
  if (flags["skip-passes"]) return { parents: n, daemon, verdicts };
  console.log(`one pass (bench/pass_agent.ts):`);
  const node = await SimNode.start({ cluster: manyParents("cp-1", n) });
  try {
    const configFile = await node.writeConfigFile();
    const profile = n === Math.max(...PARENT_COUNTS) ? flags["cpu-profile"] : undefined;
    const steady = await measureSteady(node, configFile, n, profile);
    const traced = flags["skip-strace"] ? undefined : await tracedPasses(node, configFile);
    return { parents: n, daemon, verdicts, ...steady, strace: traced };
  } finally {
    await node.close();
  }
}

/** Deno's own footprint: a script that only waits, with the daemon's flags. */
async function denoBaseline(): Promise<MemorySample> {
  const script = await Deno.makeTempFile({ suffix: ".ts" });
  try {
    await Deno.writeTextFile(script, "await new Promise((r) => setTimeout(r, 1500));\n");
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", ...agentDenoFlags(), script],
      env: AGENT_MALLOC_ENV,
    }).spawn();
    let max: MemorySample = { rss: 0, anon: 0, file: 0 };
    const sampling = setInterval(() => {
      const m = memoryOf(child.pid);
      if (m && m.rss > max.rss) max = m;
    }, 100);
    await child.status;
    clearInterval(sampling);
    return max;
  } finally {
    await Deno.remove(script);
  }
}

const loadBefore = Deno.loadavg();
const calibrationBefore = await calibrationMs();
console.log(
  `load average before: ${loadBefore.join(" ")}; ${navigator.hardwareConcurrency} CPUs; ` +
    `calibration ${calibrationBefore.toFixed(0)} ms CPU (bench/calibration.ts)`,
);
const baseline = await denoBaseline();
console.log(`a Deno script that only waits (the daemon's flags): ${memoryText(baseline)}`);
const results = [];
for (const n of PARENT_COUNTS) results.push(await benchParents(n));
const loadAfter = Deno.loadavg();
const calibrationAfter = await calibrationMs();
console.log(
  `\nload average after: ${loadAfter.join(" ")}; calibration ${calibrationAfter.toFixed(0)} ms CPU`,
);
const missed = results.flatMap((r) =>
  r.verdicts.filter((v) => v.missedBy || v.value === undefined)
);
console.log(
  missed.length === 0
    ? "every target met"
    : `${missed.length} of ${
      results.reduce((sum, r) => sum + r.verdicts.length, 0)
    } figures missed their target or were not measured`,
);
if (flags.json) {
  await Deno.writeTextFile(
    flags.json,
    JSON.stringify(
      { loadBefore, loadAfter, calibrationBefore, calibrationAfter, baseline, results },
      null,
      2,
    ),
  );
}
