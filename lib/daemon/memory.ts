/**
 * What the daemon gives back between passes. A pass over 1,000 parents allocates about 70 MB
 * (two 4 MB pod lists parsed and checked, the runtime's list, a stat of every manifest), of
 * which about 25 MB stays alive; left to itself V8 lets its heap grow to several times what
 * survives before it collects, and keeps the pages it freed. The daemon is idle between passes,
 * so it collects then, in the way that also returns the freed pages to the kernel: some 50 ms of
 * CPU outside the pass, and the next pass regrows the heap it needs (docs/benchmarks.md, "Node
 * pass"). It does so only when the heap has at least doubled since it last did: on a small node
 * that is rare, and its passes stay as fast as without.
 *
 * V8 offers that collection only as `gc()`, which exists when the runtime was started with
 * `--expose-gc`: the compiled binary is (scripts/permissions.ts, AGENT_V8_FLAGS). Started without
 * it (e.g. `deno run main.ts`), the daemon does nothing here.
 */
import { getHeapStatistics } from "node:v8";

interface GcOptions {
  type: "major";
  execution: "sync";
  /** "last-resort": collects until nothing more is freed, shrinks the young generation and
   *  returns the freed pages; "regular" would keep them for later. */
  flavor: "last-resort";
}

type Gc = (options: GcOptions) => void;

function exposedGc(): Gc | undefined {
  return (globalThis as { gc?: Gc }).gc;
}

export class HeapTrimmer {
  readonly #gc: Gc | undefined;
  /** V8's committed heap right after the last collection here. */
  #after = 0;

  /** `gc`: V8's, if exposed; a test may pass its own. */
  constructor(gc: Gc | undefined = exposedGc()) {
    this.#gc = gc;
  }

  /** Call between passes. True when it collected. */
  trim(): boolean {
    if (this.#gc === undefined) return false;
    if (this.#after > 0 && getHeapStatistics().total_heap_size < 2 * this.#after) return false;
    this.#gc({ type: "major", execution: "sync", flavor: "last-resort" });
    this.#after = getHeapStatistics().total_heap_size;
    return true;
  }
}
