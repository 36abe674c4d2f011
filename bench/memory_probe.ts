/**
 * Where the daemon's memory goes, pass by pass and phase by phase: a simulated node with N
 * parents (lib/sim/node.ts, in this process) and the real agent in a process of its own
 * (bench/memory_agent.ts), from an empty node through its first pass and `--passes` more.
 *
 *   deno run -A bench/memory_probe.ts [--parents 1000] [--passes 12] [--v8-flags FLAGS]
 *                                     [--heap-snapshot PREFIX] [--allocations FILE]
 *                                     [--refresh-interval 1m] [--poll-interval 1s] [--glibc-defaults]
 *
 * `--v8-flags` defaults to the compiled binary's (scripts/permissions.ts); `""` for none.
 * Prints, for every phase the agent notes (memory_agent.ts), RSS split into anonymous and
 * file-backed pages, and V8's own figures: heap committed and used, young generation, external,
 * malloced; after a pass also the anonymous memory by mapping: glibc's main arena (`[heap]`),
 * V8's heap pages, and the rest (threads' stacks and arenas). Also the largest RSS sampled from
 * outside during each pass, every 50 ms.
 */
import { parseArgs } from "node:util";
import { manyParents } from "../lib/sim/control_plane.ts";
import { SimNode } from "../lib/sim/node.ts";
import { AGENT_MALLOC_ENV, AGENT_V8_FLAGS } from "../scripts/permissions.ts";
import type { PhaseMemory } from "./memory_agent.ts";
import { lines } from "./pass_protocol.ts";

const { values: flags } = parseArgs({
  args: Deno.args,
  options: {
    parents: { type: "string", default: "1000" },
    passes: { type: "string", default: "12" },
    /** By default the compiled binary's (scripts/permissions.ts); "" for none. */
    "v8-flags": { type: "string", default: AGENT_V8_FLAGS.map((f) => f.flag).join(",") },
    "heap-snapshot": { type: "string" },
    /** Sample every allocation of the passes after the second into this file. */
    allocations: { type: "string" },
    "refresh-interval": { type: "string", default: "1m" },
    "poll-interval": { type: "string", default: "1s" },
    /** Run the agent with glibc's own allocator settings instead of the unit's. */
    "glibc-defaults": { type: "boolean", default: false },
  },
});
const AGENT_SCRIPT = new URL("./memory_agent.ts", import.meta.url).pathname;
const SAMPLE_MS = 50;

const mb = (bytes: number) => (bytes / 1048576).toFixed(1).padStart(6);
const kbAsMb = (kb: number) => Number.isNaN(kb) ? "     -" : mb(kb * 1024);

const node = await SimNode.start({ cluster: manyParents("cp-1", Number(flags.parents)) });
try {
  const configFile = await node.writeConfigFile();
  const v8Flags = flags["v8-flags"];
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-all",
      ...(v8Flags ? [`--v8-flags=${v8Flags}`] : []),
      AGENT_SCRIPT,
      "--passes",
      flags.passes,
      "--config",
      configFile,
      "--poll-interval",
      flags["poll-interval"],
      "--refresh-interval",
      flags["refresh-interval"],
    ],
    stdout: "piped",
    stderr: "inherit",
    env: {
      ...(flags["glibc-defaults"] ? {} : AGENT_MALLOC_ENV),
      ...(flags["heap-snapshot"] ? { CKPT_BENCH_HEAP_SNAPSHOT: flags["heap-snapshot"] } : {}),
      ...(flags.allocations ? { CKPT_BENCH_ALLOCATIONS: flags.allocations } : {}),
    },
  }).spawn();
  let done = false;
  let passPeak = 0;
  const sampler = (async () => {
    while (!done) {
      try {
        const status = await Deno.readTextFile(`/proc/${child.pid}/status`);
        passPeak = Math.max(passPeak, Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0));
      } catch {
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, SAMPLE_MS));
    }
  })();
  console.log(
    `${flags.parents} parents${v8Flags ? `, --v8-flags=${v8Flags}` : ""}; MB` +
      "\npass phase                     ms    rss   anon   file  heap(committed used new-space)" +
      "  external malloced  [heap] v8-pages other-anon",
  );
  for await (const line of lines(child.stdout)) {
    const m = JSON.parse(line) as PhaseMemory;
    if (m.phase === "pass start") passPeak = 0;
    console.log(
      `${String(m.pass).padStart(4)} ${m.phase.padEnd(24)} ${m.atMs.toFixed(0).padStart(6)}` +
        `${kbAsMb(m.rss)} ${kbAsMb(m.anon)} ${kbAsMb(m.file)}  ${mb(m.heapCommitted)} ` +
        `${mb(m.heapUsed)} ${mb(m.newSpace)}      ${mb(m.external)}   ${mb(m.malloced)}` +
        `   ${kbAsMb(m.mallocHeap)}   ${kbAsMb(m.v8Pages)}  ${
          kbAsMb(m.anon - m.mallocHeap - m.v8Pages)
        }` +
        (m.phase.startsWith("pass done")
          ? `   (peak RSS during the pass ${kbAsMb(passPeak)})`
          : ""),
    );
  }
  done = true;
  await sampler;
  const status = await child.status;
  if (!status.success) throw new Error(`the agent exited with ${status.code}`);
} finally {
  await node.close();
}
