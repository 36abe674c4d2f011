/**
 * The agent side of bench/memory_probe.ts: the real Agent, stores and clients, as
 * `ckpt-agent run` builds them, passing every poll interval like the daemon, and writing one JSON line
 * per phase of each pass to stdout: the process's memory as the kernel counts it (RSS, anon,
 * file) and as V8 does (heap committed, used, external, malloced), so that native memory can be
 * told from the JavaScript heap. Arguments: `--passes N`, then ckpt-agent configuration flags.
 *
 * Between passes it trims the heap as the daemon does (lib/daemon/memory.ts; only with
 * `--v8-flags=--expose-gc`).
 *
 * CKPT_BENCH_ALLOCATIONS=FILE samples every allocation of the passes after the second, garbage
 * included, and writes the sampling heap profile (summarize it with
 * bench/allocation_summary.ts).
 *
 * CKPT_BENCH_MALLOC_STATS=1 prints glibc's malloc_stats() (bytes each arena holds and uses) to
 * stderr after each pass (through FFI: the bench runs with --allow-all; the agent never does).
 *
 * CKPT_BENCH_HEAP_SNAPSHOT=PREFIX writes two heap snapshots of the last pass: when its
 * observation is complete (`PREFIX-observed.heapsnapshot`) and after it
 * (`PREFIX-between-passes.heapsnapshot`), for bench/heap_summary.ts or Chrome DevTools.
 */
import { notedSources } from "./noted_sources.ts";
import type { SourceName } from "../lib/sources/types.ts";
import { Session } from "node:inspector/promises";
import { startAllocationSampling, stopAllocationSampling } from "./heap_sampling.ts";
import v8 from "node:v8";
import { Agent } from "../lib/pass/agent.ts";
import type { Observation } from "../lib/pass/observe.ts";
import { AgentStores } from "../lib/store/agent_stores.ts";
import { loadConfig } from "../lib/config/load.ts";
import { systemClock } from "../lib/core/time.ts";
import { acquireLock, isLock } from "../lib/disk/lock.ts";
import { silentLogger } from "../lib/util/log.ts";
import { HeapTrimmer } from "../lib/daemon/memory.ts";
import { connectNode } from "../lib/sources/node.ts";
import { anonByMapping } from "./anon_mappings.ts";

export interface PhaseMemory {
  pass: number;
  phase: string;
  /** Milliseconds since the pass started. */
  atMs: number;
  /** Kilobytes, from /proc/self/status. */
  rss: number;
  anon: number;
  file: number;
  /** Kilobytes of anonymous memory in glibc's main malloc arena (`[heap]` in smaps); NaN when
   *  not looked at (see kernelMemory). */
  mallocHeap: number;
  /** Kilobytes of anonymous memory in 256 KiB mappings: V8's heap pages, pooled ones included. */
  v8Pages: number;
  /** Bytes, from v8.getHeapStatistics(). */
  heapCommitted: number;
  heapUsed: number;
  external: number;
  malloced: number;
  /** Bytes committed by V8's young generation (both semi-spaces). */
  newSpace: number;
}

if (Deno.args[0] !== "--passes") throw new Error("usage: memory_agent.ts --passes N FLAGS...");
const PASSES = Number(Deno.args[1]);

/** `mappings`: also split anonymous memory by mapping, which reads all of /proc/self/smaps
 *  (about a megabyte of text): only after a pass, so as not to weigh on the pass itself. */
function kernelMemory(mappings: boolean) {
  const status = Deno.readTextFileSync("/proc/self/status");
  const field = (name: string) =>
    Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1]);
  if (!mappings) {
    return {
      rss: field("VmRSS"),
      anon: field("RssAnon"),
      file: field("RssFile"),
      mallocHeap: NaN,
      v8Pages: NaN,
    };
  }
  return {
    rss: field("VmRSS"),
    anon: field("RssAnon"),
    file: field("RssFile"),
    ...anonByMapping("self"),
  };
}

let pass = 0;
let passStart = 0;
const out = new TextEncoder();

function note(phase: string, mappings = false) {
  const heap = v8.getHeapStatistics();
  const newSpace = v8.getHeapSpaceStatistics().find((s) => s.space_name === "new_space");
  const sample: PhaseMemory = {
    pass,
    phase,
    atMs: performance.now() - passStart,
    ...kernelMemory(mappings),
    heapCommitted: heap.total_heap_size,
    heapUsed: heap.used_heap_size,
    external: heap.external_memory,
    malloced: heap.malloced_memory,
    newSpace: newSpace?.space_size ?? 0,
  };
  Deno.stdout.writeSync(out.encode(`${JSON.stringify(sample)}\n`));
}

const snapshotPrefix = Deno.env.get("CKPT_BENCH_HEAP_SNAPSHOT");
const allocationsFile = Deno.env.get("CKPT_BENCH_ALLOCATIONS");
const profiler = allocationsFile ? new Session() : undefined;

const { config } = await loadConfig(Deno.args.slice(2));
const lock = await acquireLock(config.lockFile);
if (!isLock(lock)) throw new Error(`the lock ${config.lockFile} is held by pid ${lock.heldBy}`);
note("started", true);
const connected = await connectNode(config);
const LIST_ANSWERED: Record<SourceName, string> = {
  apiserver: "api list answered",
  kubelet: "kubelet list answered",
  runtime: "runtime answered",
};
const sources = notedSources(connected, (source) => note(LIST_ANSWERED[source]));

class ProbedAgent extends Agent {
  override async observe(...args: Parameters<Agent["observe"]>): Promise<Observation> {
    const observation = await super.observe(...args);
    note("observed");
    if (snapshotPrefix && pass === PASSES + 1) {
      v8.writeHeapSnapshot(`${snapshotPrefix}-observed.heapsnapshot`);
    }
    return observation;
  }
}

const heap = new HeapTrimmer();
const agent = new ProbedAgent({ config, sources, clock: systemClock, log: silentLogger });
const stores = await AgentStores.open(config.stateDir, silentLogger);
note("connected");
try {
  for (pass = 1; pass <= PASSES + 1; pass++) {
    if (profiler && pass === 3) await startAllocationSampling(profiler);
    passStart = performance.now();
    note("pass start");
    const report = await agent.pass(stores);
    note(report.complete ? "pass done" : "pass done (degraded)", true);
    if (heap.trim()) note("after trimming the heap", true);
    if (Deno.env.get("CKPT_BENCH_MALLOC_STATS")) {
      Deno.dlopen("libc.so.6", { malloc_stats: { parameters: [], result: "void" } }).symbols
        .malloc_stats();
    }
    await new Promise((resolve) => setTimeout(resolve, config.pollIntervalMs));
    note("after the poll interval");
    if (snapshotPrefix && pass === PASSES + 1) {
      v8.writeHeapSnapshot(`${snapshotPrefix}-between-passes.heapsnapshot`);
    }
  }
  if (profiler) await Deno.writeTextFile(allocationsFile!, await stopAllocationSampling(profiler));
} finally {
  sources.runtime.close();
  await lock.release();
}
