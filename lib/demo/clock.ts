/**
 * The demo's clock: real time plus the time the story skipped. Skipping is how the demo lives
 * through a 60 s grace period at once, with the agent reading nothing but this clock.
 */
import { type Clock, type Instant, millisToDuration, systemClock } from "../core/time.ts";

export class SkippingClock implements Clock {
  #skipped = 0n;

  now(): Instant {
    return systemClock.now() + this.#skipped;
  }

  skip(ms: number): void {
    this.#skipped += millisToDuration(ms);
  }
}
