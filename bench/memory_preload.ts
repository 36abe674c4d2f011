/**
 * Loaded before `main.ts` (`deno run --preload`) by bench/daemon_memory.ts: every 250 ms one JSON
 * line of V8's own figures (heap committed and used, young generation, external, malloced) to
 * $CKPT_BENCH_MEMORY_LOG; each SIGUSR2 writes a heap snapshot to
 * `$CKPT_BENCH_HEAP_SNAPSHOT-<n>.heapsnapshot` (for bench/heap_summary.ts), then says so in the
 * log. With $CKPT_BENCH_ALLOCATIONS set instead, the first SIGUSR2 starts sampling every
 * allocation, garbage included, and the second writes the sampling heap profile there (for
 * bench/allocation_summary.ts).
 */
import { Session } from "node:inspector/promises";
import v8 from "node:v8";
import { startAllocationSampling, stopAllocationSampling } from "./heap_sampling.ts";

const log = Deno.env.get("CKPT_BENCH_MEMORY_LOG");
if (!log) throw new Error("CKPT_BENCH_MEMORY_LOG is not set");
const file = Deno.openSync(log, { write: true, create: true, truncate: true });
const encoder = new TextEncoder();
const write = (line: Record<string, unknown>) =>
  file.writeSync(encoder.encode(`${JSON.stringify({ at: Date.now(), ...line })}\n`));

const timer = setInterval(() => {
  const heap = v8.getHeapStatistics();
  const newSpace = v8.getHeapSpaceStatistics().find((s) => s.space_name === "new_space");
  write({
    heapCommitted: heap.total_heap_size,
    heapUsed: heap.used_heap_size,
    external: heap.external_memory,
    malloced: heap.malloced_memory,
    newSpace: newSpace?.space_size ?? 0,
  });
}, 250);
Deno.unrefTimer(timer);

// SIGUSR1: a full collection that returns freed pages (as lib/daemon/memory.ts's), to tell what
// is alive from what is garbage not collected yet; the next line of figures shows it.
const gc = (globalThis as { gc?: (options: unknown) => void }).gc;
if (gc) {
  Deno.addSignalListener("SIGUSR1", () => {
    gc({ type: "major", execution: "sync", flavor: "last-resort" });
    write({ collected: true });
  });
}

const prefix = Deno.env.get("CKPT_BENCH_HEAP_SNAPSHOT");
const allocations = Deno.env.get("CKPT_BENCH_ALLOCATIONS");
let snapshots = 0;
if (allocations) {
  const session = new Session();
  let sampling = false;
  Deno.addSignalListener("SIGUSR2", async () => {
    if (!sampling) {
      sampling = true;
      await startAllocationSampling(session);
      return;
    }
    await Deno.writeTextFile(allocations, await stopAllocationSampling(session));
    write({ allocations });
  });
} else if (prefix) {
  Deno.addSignalListener("SIGUSR2", () => {
    const path = `${prefix}-${++snapshots}.heapsnapshot`;
    v8.writeHeapSnapshot(path);
    write({ snapshot: path });
  });
}
