/**
 * The agent side of bench/pass_bench.ts: the real Agent, stores, clients and lock, as
 * `ckpt-agent run` builds them, running one pass per request read from stdin (see
 * pass_protocol.ts). Arguments are ckpt-agent configuration flags (`--config FILE ...`).
 */
import { notedSources } from "./noted_sources.ts";
import { Agent } from "../lib/pass/agent.ts";
import type { Observation } from "../lib/pass/observe.ts";
import { AgentStores } from "../lib/store/agent_stores.ts";
import { loadConfig } from "../lib/config/load.ts";
import { systemClock } from "../lib/core/time.ts";
import { acquireLock, isLock } from "../lib/disk/lock.ts";
import { silentLogger } from "../lib/util/log.ts";
import { HeapTrimmer } from "../lib/daemon/memory.ts";
import { connectNode } from "../lib/sources/node.ts";
import type { SourceName } from "../lib/sources/types.ts";
import { Session } from "node:inspector/promises";
import { cpuUsage } from "node:process";
import { type AgentAnswer, type AgentRequest, lines, type PassTiming } from "./pass_protocol.ts";

const { config } = await loadConfig(Deno.args);
const lock = await acquireLock(config.lockFile);
if (!isLock(lock)) throw new Error(`the lock ${config.lockFile} is held by pid ${lock.heldBy}`);

/** Times of the pass under way, relative to `passStart`. */
let passStart = 0;
let observedAt = 0;
let answeredAt: Record<SourceName, number> = { apiserver: 0, kubelet: 0, runtime: 0 };
let startsDurable: number[] = [];

/** `call`, noting when its answer arrived. */

// The real clients; only the moment each list comes back is noted.
const connected = await connectNode(config);
const sources = notedSources(connected, (source) => answeredAt[source] = performance.now());

class TimedAgent extends Agent {
  override async observe(...args: Parameters<Agent["observe"]>): Promise<Observation> {
    const observation = await super.observe(...args);
    observedAt = performance.now();
    return observation;
  }
}

const agent = new TimedAgent({
  config,
  sources,
  clock: systemClock,
  log: silentLogger,
  onApplied: (action) => {
    if (action.op === "start") startsDurable.push(performance.now() - passStart);
  },
});
const stores = await AgentStores.open(config.stateDir, silentLogger);

async function pass(): Promise<PassTiming> {
  startsDurable = [];
  answeredAt = { apiserver: NaN, kubelet: NaN, runtime: NaN };
  const cpuBefore = cpuUsage();
  passStart = performance.now();
  const report = await agent.pass(stores);
  const wallMs = performance.now() - passStart;
  const cpu = cpuUsage(cpuBefore);
  const applied: Record<string, number> = {};
  for (const action of report.applied) applied[action.op] = (applied[action.op] ?? 0) + 1;
  return {
    wallMs,
    cpuMs: (cpu.user + cpu.system) / 1000,
    memory: Deno.memoryUsage(),
    observedMs: observedAt - passStart,
    answeredMs: {
      apiserver: answeredAt.apiserver - passStart,
      kubelet: answeredAt.kubelet - passStart,
      runtime: answeredAt.runtime - passStart,
    },
    complete: report.complete,
    errors: [
      ...report.failures.map((f) => `${f.source}: ${f.kind}`),
      ...report.errors.map((e) => `${e.op} ${e.id ?? ""}: ${e.message}`),
    ],
    bytesWritten: report.bytesWritten,
    applied,
    startsDurableMs: startsDurable,
  };
}

async function answer(request: AgentRequest): Promise<AgentAnswer> {
  try {
    if (request.cmd === "pass") return { ok: true, timing: await pass() };
    await Deno.open(request.path).then((file) => file.close(), () => {});
    return { ok: true };
  } catch (e) {
    return { ok: false, error: (e as Error).message };
  }
}

/** CKPT_BENCH_CPU_PROFILE=FILE: a V8 CPU profile of every pass after the first. */
const profileFile = Deno.env.get("CKPT_BENCH_CPU_PROFILE");
const profiler = profileFile ? new Session() : undefined;

const out = new TextEncoder();
const heap = new HeapTrimmer();
let passes = 0;
try {
  for await (const line of lines(Deno.stdin.readable)) {
    const request = JSON.parse(line) as AgentRequest;
    if (profiler && request.cmd === "pass" && ++passes === 2) {
      profiler.connect();
      await profiler.post("Profiler.enable");
      await profiler.post("Profiler.start");
    }
    const reply = await answer(request);
    await Deno.stdout.write(out.encode(`${JSON.stringify(reply)}\n`));
    // What the daemon does between passes (lib/daemon/daemon.ts), outside the timed pass.
    if (request.cmd === "pass") heap.trim();
  }
  if (profiler && passes >= 2) {
    const { profile } = await profiler.post("Profiler.stop");
    await Deno.writeTextFile(profileFile!, JSON.stringify(profile));
  }
} finally {
  sources.runtime.close();
  await lock.release();
}
