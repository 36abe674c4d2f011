/** The daemon's heap trimming between passes (lib/daemon/memory.ts). */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { HeapTrimmer } from "../../lib/daemon/memory.ts";

Deno.test("without gc() (no --expose-gc) trimming does nothing", () => {
  assertEquals(typeof (globalThis as { gc?: unknown }).gc, "undefined");
  assertEquals(new HeapTrimmer().trim(), false);
});

Deno.test("the first trim collects, the next ones only once the heap has doubled", () => {
  const calls: unknown[] = [];
  const trimmer = new HeapTrimmer((options) => calls.push(options));
  assertEquals(trimmer.trim(), true);
  assertEquals(calls, [{ type: "major", execution: "sync", flavor: "last-resort" }]);
  // Nothing allocated in between: the heap is as the collection left it.
  assertEquals(trimmer.trim(), false);
  assertEquals(calls.length, 1);
  // Twice the heap, kept alive so that V8 cannot collect it first.
  const kept = Array.from({ length: 400 }, () => new Array(50_000).fill(0.5));
  assertEquals(trimmer.trim(), true);
  assertEquals(calls.length, 2);
  assert(kept.length > 0);
});

Deno.test("with V8's gc(), a trim returns the garbage's pages", async () => {
  const script = `
    import { getHeapStatistics } from "node:v8";
    import { HeapTrimmer } from ${
    JSON.stringify(new URL("../../lib/daemon/memory.ts", import.meta.url).href)
  };
    let garbage = Array.from({ length: 400 }, () => new Array(50_000).fill(0.5));
    const before = getHeapStatistics().total_heap_size;
    garbage = undefined;
    const trimmed = new HeapTrimmer().trim();
    console.log(JSON.stringify({ trimmed, before, after: getHeapStatistics().total_heap_size }));
  `;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--v8-flags=--expose-gc", script],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert(out.success, new TextDecoder().decode(out.stderr));
  const { trimmed, before, after } = JSON.parse(new TextDecoder().decode(out.stdout));
  assertEquals(trimmed, true);
  // 400 arrays of 50,000 doubles: 160 MB committed before, and given back.
  assert(before > 150e6 && after < before - 100e6, `${before} -> ${after} bytes`);
});
