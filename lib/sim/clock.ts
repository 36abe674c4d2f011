/** The simulated node's time: it moves only when told, so no test waits for a kubelet back-off. */
import {
  type Clock,
  type Instant,
  millisToDuration,
  NANOS_PER_MILLI,
  parseInstant,
} from "../core/time.ts";

export const SIM_EPOCH: Instant = parseInstant("2026-11-02T09:00:00Z")!;

export class SimClock implements Clock {
  #now: Instant;

  constructor(start: Instant = SIM_EPOCH) {
    this.#now = start;
  }

  now(): Instant {
    return this.#now;
  }

  advance(ms: number): void {
    this.#now += millisToDuration(ms);
  }
}

/** Milliseconds from `from` to `to`. */
export function millisBetween(from: Instant, to: Instant): number {
  return Number((to - from) / NANOS_PER_MILLI);
}
