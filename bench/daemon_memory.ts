/**
 * Where the daemon's memory goes over a run like the bench's (bench/daemon_bench.ts): `main.ts
 * run` with the unit's V8 flags and glibc settings against a simulated node with N parents, with
 * bench/memory_preload.ts loaded before it. Phases: the first pass, a settle, `--loss-rounds`
 * API losses (each until every manifest is active, then the return until every copy is
 * withdrawn), and a rest after them. Every 250 ms the daemon's RSS (anon and file), its anonymous
 * memory by mapping (glibc's main arena `[heap]`, V8's 256 KiB heap pages, the rest) and V8's own
 * figures; printed per phase at its largest RSS and at its end; last, after a full collection
 * (SIGUSR1 to the preload), what of it is alive. With `--heap-snapshot PREFIX`, a
 * heap snapshot at the end of the run (`PREFIX-1.heapsnapshot`; writing it takes much memory
 * outside V8's heap, so nothing is measured after it). With `--allocations FILE`, every
 * allocation of the loss rounds, garbage included, sampled into FILE (bench/allocation_summary.ts).
 *
 *   deno run -A bench/daemon_memory.ts [--parents 1000] [--settle-seconds 30]
 *                                      [--loss-rounds 3] [--heap-snapshot PREFIX] [--tsv FILE]
 *                                      [--allocations FILE] [--v8-flags FLAGS]
 *
 * Also the daemon's CPU time in each phase (utime + stime, every thread).
 */
import { parseArgs } from "node:util";
import { manyParents } from "../lib/sim/control_plane.ts";
import { SimNode } from "../lib/sim/node.ts";
import { AGENT_MALLOC_ENV, agentDenoFlags } from "../scripts/permissions.ts";
import { anonByMapping } from "./anon_mappings.ts";
import { jsonFiles, memoryOf } from "./daemon_bench.ts";

const { values: flags } = parseArgs({
  args: Deno.args,
  options: {
    parents: { type: "string", default: "1000" },
    "settle-seconds": { type: "string", default: "30" },
    "loss-rounds": { type: "string", default: "3" },
    "heap-snapshot": { type: "string" },
    allocations: { type: "string" },
    /** The daemon's V8 flags; by default the unit's (scripts/permissions.ts). */
    "v8-flags": { type: "string" },
    tsv: { type: "string" },
  },
});
const n = Number(flags.parents);
const SAMPLE_MS = 250;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Sample {
  at: number;
  phase: string;
  /** CPU seconds so far. */
  cpu: number;
  rss: number;
  anon: number;
  file: number;
  /** glibc's main arena, V8's heap pages, the rest of the anonymous memory; KiB. */
  arena: number;
  v8Pages: number;
  other: number;
  /** V8's figures, bytes, from the preload's last line. */
  heapCommitted: number;
  heapUsed: number;
  external: number;
}

function lastV8Line(log: string): string {
  return Deno.readTextFileSync(log).trimEnd().split("\n").at(-1) ?? "";
}

/** The preload's last line of V8 figures. */
function lastV8(log: string) {
  try {
    const lines = Deno.readTextFileSync(log).trimEnd().split("\n").reverse();
    for (const line of lines) {
      const parsed = JSON.parse(line);
      if ("heapCommitted" in parsed) return parsed;
    }
  } catch {
    // not written yet
  }
  return { heapCommitted: 0, heapUsed: 0, external: 0 };
}

const node = await SimNode.start({ cluster: manyParents("cp-1", n) });
const dir = await Deno.makeTempDir({ prefix: "ckpt-daemon-memory-" });
const log = `${dir}/v8.jsonl`;
const samples: Sample[] = [];
let phase = "first pass";
try {
  const config = node.config({ pollIntervalMs: 5_000 });
  const configFile = await node.writeConfigFile({ pollIntervalMs: 5_000 });
  const main = new URL("../main.ts", import.meta.url).pathname;
  const preload = new URL("./memory_preload.ts", import.meta.url).pathname;
  // Every permission (the preload writes its log), the unit's V8 flags.
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-all",
      agentDenoFlags().at(-1)!,
      "--preload",
      preload,
      main,
      "run",
      "--config",
      configFile,
    ],
    env: {
      ...AGENT_MALLOC_ENV,
      CKPT_BENCH_MEMORY_LOG: log,
      ...(flags["heap-snapshot"] ? { CKPT_BENCH_HEAP_SNAPSHOT: flags["heap-snapshot"] } : {}),
      ...(flags.allocations ? { CKPT_BENCH_ALLOCATIONS: flags.allocations } : {}),
    },
    stdout: "null",
    stderr: "null",
  }).spawn();
  const start = performance.now();
  const sampler = setInterval(() => {
    const memory = memoryOf(child.pid);
    if (!memory) return;
    const { mallocHeap: arena, v8Pages } = anonByMapping(child.pid);
    const v8 = lastV8(log);
    let cpu = 0;
    try {
      const stat = Deno.readTextFileSync(`/proc/${child.pid}/stat`);
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      cpu = (Number(fields[11]) + Number(fields[12])) / 100;
    } catch {
      return;
    }
    samples.push({
      at: (performance.now() - start) / 1000,
      phase,
      cpu,
      ...memory,
      arena,
      v8Pages,
      other: memory.anon - arena - v8Pages,
      heapCommitted: v8.heapCommitted,
      heapUsed: v8.heapUsed,
      external: v8.external,
    });
  }, SAMPLE_MS);
  const until = async (done: () => boolean) => {
    while (!done()) await sleep(20);
  };
  const snapshot = async () => {
    if (!flags["heap-snapshot"]) return;
    clearInterval(sampler);
    Deno.kill(child.pid, "SIGUSR2");
    await sleep(15_000);
  };
  try {
    await until(() => jsonFiles(config.inactiveDir) >= n);
    phase = "settle";
    await sleep(Number(flags["settle-seconds"]) * 1000);
    if (flags.allocations) Deno.kill(child.pid, "SIGUSR2");
    for (let round = 1; round <= Number(flags["loss-rounds"]); round++) {
      phase = `loss ${round}`;
      await sleep(Math.random() * 5_000);
      await node.loseControlPlane("down");
      await until(() => jsonFiles(config.staticPodDir) >= n);
      phase = `return ${round}`;
      await node.restoreControlPlane();
      await until(() => jsonFiles(config.staticPodDir) === 0);
    }
    if (flags.allocations) {
      Deno.kill(child.pid, "SIGUSR2");
      while (!lastV8Line(log).includes("allocations")) await sleep(100);
    }
    phase = "rest after";
    await sleep(Number(flags["settle-seconds"]) * 1000);
    // What of it is alive: after a full collection.
    phase = "after a full GC";
    Deno.kill(child.pid, "SIGUSR1");
    await sleep(3_000);
    await snapshot();
  } finally {
    clearInterval(sampler);
    child.kill("SIGKILL");
    await child.status;
  }
  const mib = (kb: number) => (kb / 1024).toFixed(1).padStart(6);
  const mb = (bytes: number) => (bytes / 1048576).toFixed(1).padStart(6);
  const row = (label: string, s: Sample) =>
    `${label.padEnd(22)} ${s.at.toFixed(1).padStart(6)} ${mib(s.rss)} ${mib(s.anon)} ${
      mib(s.file)
    } ${mib(s.arena)} ${mib(s.v8Pages)} ${mib(s.other)}  ${mb(s.heapCommitted)} ${mb(s.heapUsed)} ${
      mb(s.external)
    }`;
  console.log(`${n} parents; MiB (V8's figures MB)`);
  console.log(
    "phase                       s    rss   anon   file [heap] v8pages other  heap(committed used) external",
  );
  let cpuBefore = 0;
  for (const name of [...new Set(samples.map((s) => s.phase))]) {
    const of = samples.filter((s) => s.phase === name);
    const max = of.reduce((a, b) => (b.rss > a.rss ? b : a));
    const end = of.at(-1)!;
    console.log(row(`${name}, max`, max));
    console.log(
      `${row(`${name}, end`, end)}  CPU ${(end.cpu - cpuBefore).toFixed(2)} s in ${
        (end.at - of[0].at).toFixed(1)
      } s`,
    );
    cpuBefore = end.cpu;
  }
  if (flags.tsv) {
    const keys = Object.keys(samples[0]) as (keyof Sample)[];
    await Deno.writeTextFile(
      flags.tsv,
      [keys.join("\t"), ...samples.map((s) => keys.map((k) => s[k]).join("\t"))].join("\n") + "\n",
    );
  }
} finally {
  await node.close();
  await Deno.remove(dir, { recursive: true });
}
