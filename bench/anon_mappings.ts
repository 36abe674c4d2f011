/** V8 reserves its heap in pages of this size; nothing else here maps regions of exactly it. */
const V8_PAGE_BYTES = 256 * 1024;

/**
 * A process's anonymous memory by mapping, in KiB, from its /proc/<pid>/smaps (about a megabyte
 * of text at 1,000 parents): glibc's main malloc arena (`[heap]`) and V8's heap pages; the rest
 * (other threads' arenas, large malloc blocks, stacks, V8's large objects and code range) is
 * what RssAnon has besides.
 */
export function anonByMapping(pid: number | "self"): { mallocHeap: number; v8Pages: number } {
  let mallocHeap = 0, v8Pages = 0, bytes = 0, isHeap = false;
  for (const line of Deno.readTextFileSync(`/proc/${pid}/smaps`).split("\n")) {
    const range = /^([0-9a-f]+)-([0-9a-f]+) /.exec(line);
    if (range) {
      isHeap = line.endsWith("[heap]");
      bytes = parseInt(range[2], 16) - parseInt(range[1], 16);
    } else if (line.startsWith("Anonymous:")) {
      const kb = Number(line.split(/\s+/)[1]);
      if (isHeap) mallocHeap += kb;
      else if (bytes === V8_PAGE_BYTES) v8Pages += kb;
    }
  }
  return { mallocHeap, v8Pages };
}
