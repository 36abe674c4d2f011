/**
 * When the daemon runs a pass: one at a time, on the triggers that say something a pass depends
 * on may have changed, and never more often than a storm of them would need.
 *
 * - `start`: the first pass, at once.
 * - `poll`: pollIntervalMs after the last pass ended, whatever ran it: the kubelet's /pods and the
 *   runtime tell nothing of their own accord, and the poll is the fallback for every event missed.
 *   The daemon may shorten the interval after a pass (setPollInterval), e.g. during an outage.
 * - `change` (a source's ChangeFeed) and `files` (the static-pod or inactive dir): COALESCE_MS
 *   after the first of them, so that a burst (a pod updated three times, a manifest written as a
 *   temp file and renamed) is one pass.
 * - `apiserver`: the API server was lost or is back (lib/sources/changes.ts, REACHABILITY): as
 *   `change`, but spaced by MIN_SPACING_MS only, whatever the last pass took. A failover, and the
 *   withdrawal that lets the control plane return, are the moments the agent is for; each is
 *   told once until the other, so these passes cannot storm.
 * - `deadline`: a timer for the earliest instant at which a pass would decide otherwise (a grace
 *   period ends, a start times out), so it is honoured then and not at the next poll.
 * - `request`: someone waits for a pass that starts after asking (`POST /v1/reconcile`): at once,
 *   or right after the pass under way.
 *
 * Triggers that arrive while a pass runs wait for it to end and then make one pass together.
 * `change`, `files` and `deadline` passes start at least the spacing after the previous pass
 * ended (see spacingMs), `apiserver` passes at least MIN_SPACING_MS after it. A change carries no
 * data: the pass observes everything again, so merging triggers loses nothing.
 */
import type { Logger } from "../util/log.ts";
import { MAX_TIMER_MS, realTimers, type Timers } from "../util/timers.ts";

export const TRIGGERS = [
  "start",
  "poll",
  "change",
  "apiserver",
  "files",
  "deadline",
  "request",
] as const;
export type Trigger = typeof TRIGGERS[number];

/** What asked for a pass: the first trigger, and the reasons of all that were merged into it. */
export interface PassCause {
  trigger: Trigger;
  /** The first MAX_REASONS distinct reasons, in order of arrival, for the log. */
  reasons: string[];
  /** How many triggers this one pass answers. */
  triggers: number;
}

/**
 * How long a `change` or `files` trigger waits for others: the watches tell a pod's update as
 * several events within a few milliseconds, and a manifest written atomically is a create, a
 * write and a rename; 50 ms merges those while adding nothing noticeable to a failover.
 */
export const COALESCE_MS = 50;

/**
 * The least time between the end of a pass and the start of one that events asked for. The
 * agent's own writes to the watched dirs come back as events, and a peer may flap: without a
 * floor, a storm could run passes back to back. 100 ms bounds a storm to ten passes a second and
 * keeps a failover that follows a burst well inside a second.
 */
export const MIN_SPACING_MS = 100;

/** The spacing never grows past this, however long the last pass took (see spacingMs). */
export const MAX_SPACING_MS = 1_000;

const MAX_REASONS = 8;

/**
 * The spacing after a pass of `lastDurationMs`: at least as long as the pass, so that a storm
 * keeps the daemon busy at most half the time even on a node whose passes are slow; between
 * MIN_SPACING_MS and MAX_SPACING_MS, so that a pass that waited minutes on a peer does not hold
 * the next event as long.
 */
export function spacingMs(lastDurationMs: number): number {
  return Math.min(MAX_SPACING_MS, Math.max(MIN_SPACING_MS, lastDurationMs));
}

/** How long each trigger waits for others, and which spacing it keeps: none, the floor
 *  (MIN_SPACING_MS), or the spacing the last pass's duration sets (spacingMs). */
const WAITS: Record<Trigger, { coalesceMs: number; spaced: "no" | "floor" | "yes" }> = {
  start: { coalesceMs: 0, spaced: "no" },
  poll: { coalesceMs: 0, spaced: "no" },
  change: { coalesceMs: COALESCE_MS, spaced: "yes" },
  apiserver: { coalesceMs: COALESCE_MS, spaced: "floor" },
  files: { coalesceMs: COALESCE_MS, spaced: "yes" },
  deadline: { coalesceMs: 0, spaced: "yes" },
  request: { coalesceMs: 0, spaced: "no" },
};

interface Waiter<R> {
  resolve: (result: R) => void;
  reject: (error: unknown) => void;
}

/** The triggers waiting for the next pass. */
class Pending<R> {
  /** When each kind of trigger first arrived. */
  readonly firstAt = new Map<Trigger, number>();
  readonly reasons = new Set<string>();
  readonly waiters: Waiter<R>[] = [];
  count = 0;

  add(trigger: Trigger, reason: string, at: number) {
    if (!this.firstAt.has(trigger)) this.firstAt.set(trigger, at);
    if (this.reasons.size < MAX_REASONS) this.reasons.add(reason);
    this.count++;
  }

  /** When the pass these triggers ask for is due, given when the last pass ended. */
  dueAt(lastEnd: number, spacing: number): number {
    let due = Infinity;
    for (const [trigger, at] of this.firstAt) {
      const wait = WAITS[trigger];
      const gap = wait.spaced === "yes"
        ? spacing
        : wait.spaced === "floor"
        ? MIN_SPACING_MS
        : -Infinity;
      due = Math.min(due, Math.max(at + wait.coalesceMs, lastEnd + gap));
    }
    return due;
  }

  cause(): PassCause {
    return {
      trigger: this.firstAt.keys().next().value!,
      reasons: [...this.reasons],
      triggers: this.count,
    };
  }
}

export interface PassSchedulerOptions<R> {
  /** One pass; never called while the previous one runs. */
  run: (cause: PassCause) => Promise<R>;
  pollIntervalMs: number;
  timers?: Timers;
  log: Logger;
}

export class PassScheduler<R> {
  readonly #run: (cause: PassCause) => Promise<R>;
  #pollIntervalMs: number;
  readonly #timers: Timers;
  readonly #log: Logger;
  #started = false;
  /** The pass (or the work between passes) under way; undefined when none. */
  #running?: Promise<void>;
  #pending?: Pending<R>;
  /** Work waiting to run between passes (`between`), first first. */
  readonly #between: (() => Promise<void>)[] = [];
  #lastEnd = -Infinity;
  #lastDurationMs = 0;
  #cancelPass?: () => void;
  /** When the armed pass timer fires. */
  #passDueAt?: number;
  #cancelPoll?: () => void;
  #cancelDeadline?: () => void;

  constructor(opts: PassSchedulerOptions<R>) {
    this.#run = opts.run;
    this.#pollIntervalMs = opts.pollIntervalMs;
    this.#timers = opts.timers ?? realTimers;
    this.#log = opts.log;
  }

  /** Runs the first pass now, and from then on passes on triggers and polls. */
  start() {
    if (this.#started) return;
    this.#started = true;
    this.#add("start", "start");
  }

  /** Cancels every timer and ignores triggers from now on; resolves once the pass under way
   *  (and any a request still waits for, and any work waiting between passes) has ended. */
  async stop() {
    this.#started = false;
    // Triggers nobody waits for need no pass any more; a request still gets its own.
    if (this.#pending?.waiters.length === 0) this.#pending = undefined;
    this.#cancelPass?.();
    this.#cancelPoll?.();
    this.#cancelDeadline?.();
    this.#cancelPass =
      this.#passDueAt =
      this.#cancelPoll =
      this.#cancelDeadline =
        undefined;
    while (this.#running) await this.#running;
  }

  /** Something a pass depends on may have changed. Ignored unless started. */
  trigger(trigger: Exclude<Trigger, "request" | "start">, reason: string) {
    if (this.#started) this.#add(trigger, reason);
  }

  /** A pass that starts after this call, started or not: at once, or after the one under way. */
  request(reason: string): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.#add("request", reason, { resolve, reject });
    });
  }

  /**
   * Runs `work` when no pass is under way, and holds the passes asked for meanwhile until it
   * ends: for what changes what a pass reads, and must not do so in the middle of one.
   */
  between<T>(work: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#between.push(() => work().then(resolve, reject));
      this.#schedule();
    });
  }

  /** The poll interval from the end of the pass under way on (or of the next one). */
  setPollInterval(ms: number) {
    this.#pollIntervalMs = ms;
  }

  /** The next instant a pass would decide otherwise, `delayMs` from now; undefined: none. */
  setDeadline(delayMs: number | undefined, reason: string) {
    this.#cancelDeadline?.();
    this.#cancelDeadline = undefined;
    if (!this.#started || delayMs === undefined) return;
    const ms = Math.min(Math.max(0, delayMs), MAX_TIMER_MS);
    this.#cancelDeadline = this.#timers.after(ms, () => {
      this.#cancelDeadline = undefined;
      this.trigger("deadline", reason);
    });
  }

  /** Whether a pass runs now. */
  get running(): boolean {
    return this.#running !== undefined;
  }

  #add(trigger: Trigger, reason: string, waiter?: Waiter<R>) {
    this.#pending ??= new Pending();
    this.#pending.add(trigger, reason, this.#timers.now());
    if (waiter) this.#pending.waiters.push(waiter);
    this.#schedule();
  }

  /** Runs the pending pass when it is due, or arms the timer for it (once per due time: a
   *  storm of triggers does not set a timer each). */
  #schedule() {
    if (!this.#running && this.#between.length > 0) return this.#runBetween();
    const due = this.#running || !this.#pending
      ? undefined
      : this.#pending.dueAt(this.#lastEnd, spacingMs(this.#lastDurationMs));
    if (due !== undefined && due === this.#passDueAt) return;
    this.#cancelPass?.();
    this.#cancelPass = this.#passDueAt = undefined;
    if (due === undefined) return;
    const now = this.#timers.now();
    if (due <= now) return this.#runPending();
    this.#passDueAt = due;
    this.#cancelPass = this.#timers.after(due - now, () => {
      this.#cancelPass = this.#passDueAt = undefined;
      this.#schedule();
    });
  }

  #runBetween() {
    this.#cancelPass?.();
    this.#cancelPass = this.#passDueAt = undefined;
    const work = this.#between.shift()!;
    this.#running = work().then(() => {
      this.#running = undefined;
      this.#schedule();
    });
  }

  #runPending() {
    const pending = this.#pending!;
    this.#pending = undefined;
    this.#cancelPoll?.();
    this.#cancelPoll = undefined;
    const startedAt = this.#timers.now();
    // Those waiting for the pass are told once the next one is scheduled.
    this.#running = this.#run(pending.cause()).then(
      (result) => {
        this.#ended(startedAt);
        for (const w of pending.waiters) w.resolve(result);
      },
      (error) => {
        this.#ended(startedAt);
        for (const w of pending.waiters) w.reject(error);
        // A pass never throws by design; if one does, the passes must still go on.
        if (pending.waiters.length === 0) this.#log.error("pass failed", { error });
      },
    );
  }

  #ended(startedAt: number) {
    this.#lastEnd = this.#timers.now();
    this.#lastDurationMs = this.#lastEnd - startedAt;
    this.#running = undefined;
    if (this.#started) {
      this.#cancelPoll = this.#timers.after(this.#pollIntervalMs, () => {
        this.#cancelPoll = undefined;
        this.trigger("poll", "poll");
      });
    }
    this.#schedule();
  }
}
