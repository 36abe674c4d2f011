/**
 * Time as the daemon's schedulers and connections see it: monotonic milliseconds and one-shot
 * timers, so that a test drives its own (tests/helpers/manual_timers.ts).
 */
export interface Timers {
  now(): number;
  /** Calls `fn` once after `ms`, unless the returned function is called first. */
  after(ms: number, fn: () => void): () => void;
}

/**
 * The longest a timer can wait: setTimeout fires at once for anything longer. A deadline further
 * off (a grace period of months) gets its call at this delay, which finds it still ahead and waits
 * again.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

export const realTimers: Timers = {
  now: () => performance.now(),
  after: (ms, fn) => {
    const timer = setTimeout(fn, Math.min(ms, MAX_TIMER_MS));
    return () => clearTimeout(timer);
  },
};
