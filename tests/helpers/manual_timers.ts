/**
 * The daemon's timers (lib/daemon/pass_scheduler.ts, Timers) on a time the test moves: nothing
 * fires until the test advances past it, and then in order of due time, each after what the one
 * before it set off has settled.
 */
import type { Timers } from "../../lib/util/timers.ts";

/** Lets the promise callbacks that are queued, and those they queue, run. */
export async function settle() {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

export class ManualTimers implements Timers {
  #t = 0;
  #ids = 0;
  readonly #due = new Map<number, { at: number; fn: () => void }>();

  /** `onAdvance`: told of each step of time, e.g. to move a clock along. */
  constructor(private readonly onAdvance?: (ms: number) => void) {}

  now(): number {
    return this.#t;
  }

  after(ms: number, fn: () => void): () => void {
    const id = this.#ids++;
    this.#due.set(id, { at: this.#t + ms, fn });
    return () => this.#due.delete(id);
  }

  /** How far ahead each armed timer is, soonest first. */
  get armed(): number[] {
    return [...this.#due.values()].map((d) => d.at - this.#t).sort((a, b) => a - b);
  }

  /** Moves time on by `ms`, firing every timer due on the way. */
  async advance(ms: number) {
    const end = this.#t + ms;
    for (;;) {
      await settle();
      let next: [number, { at: number; fn: () => void }] | undefined;
      for (const entry of this.#due) {
        if (entry[1].at <= end && (next === undefined || entry[1].at < next[1].at)) next = entry;
      }
      if (next === undefined) break;
      this.#due.delete(next[0]);
      this.#move(next[1].at);
      next[1].fn();
    }
    this.#move(end);
    await settle();
  }

  #move(to: number) {
    const step = to - this.#t;
    if (step <= 0) return;
    this.#t = to;
    this.onAdvance?.(step);
  }
}
