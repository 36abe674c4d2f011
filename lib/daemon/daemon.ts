/**
 * The daemon around the agent: passes when something they depend on changes and every poll
 * interval (pass_scheduler.ts), one at a time (the loop and `POST /v1/reconcile` share them),
 * and what the admin endpoint reports about the loop.
 */
import { CHECKPOINT_DIRS, loopAlive, passDeadlineMs, type Readiness, readiness } from "./probes.ts";
import { Agent } from "../pass/agent.ts";
import { trackedFromStore } from "../pass/observe.ts";
import type { PassReport } from "../pass/report.ts";
import type { Config } from "../config/types.ts";
import { type Clock, type Instant, millisToDuration, NANOS_PER_MILLI } from "../core/time.ts";
import { readOnlyDirs } from "../disk/mounts.ts";
import type { Logger } from "../util/log.ts";
import { nextDeadline } from "./deadlines.ts";
import { DirWatcher, type WatchFs } from "./dir_watch.ts";
import { HeapTrimmer } from "./memory.ts";
import type { Timers } from "../util/timers.ts";
import { type PassCause, PassScheduler } from "./pass_scheduler.ts";
import { PassLog } from "./pass_log.ts";
import type { AgentStores } from "../store/agent_stores.ts";
import { REACHABILITY } from "../sources/changes.ts";

export type PassListener = (report: PassReport, cause: PassCause) => void;

/**
 * The poll interval while the API server fails and a tracked parent's checkpoint is inactive
 * (outagePolls): a parent that stops then is seen within this, not within pollInterval, and its
 * copy activated. Such a poll that finds the kubelet and the runtime answering as before is idle
 * (lib/pass/agent.ts), about 8 ms of CPU at 100 parents (docs/benchmarks.md); the API server is
 * asked every pollInterval.
 */
export const OUTAGE_POLL_MS = 200;

/**
 * Whether the passes after `report` poll every OUTAGE_POLL_MS: the API server failed, so nothing
 * vouches for a parent that stops; the runtime answered, so a stop can be seen; and some
 * checkpoint is inactive, so a parent may still stop.
 */
export function outagePolls(report: PassReport): boolean {
  return report.failures.some((f) => f.source === "apiserver") &&
    report.failures.every((f) => f.source !== "runtime") &&
    Object.values(report.plan.state).some((entry) =>
      entry.state === "inactive" || entry.state === "inactive-grace"
    );
}

export class Daemon {
  readonly agent: Agent;
  readonly stores: AgentStores;
  readonly config: Config;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #listeners: PassListener[] = [];
  readonly #heap: HeapTrimmer;
  readonly #scheduler: PassScheduler<PassReport>;
  readonly #watchFs?: WatchFs;
  /** The manifest dirs' watch, while the loop runs. */
  #dirs?: DirWatcher;
  /** When the daemon was made: the heartbeat is measured from here until the first pass. */
  readonly startedAt: Instant;
  /** When the pass under way started; undefined between passes. */
  #passStartedAt?: Instant;
  /** Aborted when the API server is lost or back while the pass under way runs (Agent.pass
   *  `cut`). */
  #cut?: AbortController;
  /** When a pass last finished, complete or not: the loop's heartbeat. */
  lastTick?: Instant;
  lastReport?: PassReport;
  lastCompletePassAt?: Instant;
  /** How many events the sources' change feed told, while the loop runs (Agent.pass `heard`). */
  #heard?: number;
  /** Checkpoint directories on a read-only mount, checked after each pass that was not idle. */
  #readOnlyDirs: ReadonlyMap<string, string> = new Map();
  readonly #lockProblem?: string;

  constructor(
    opts: {
      agent: Agent;
      stores: AgentStores;
      config: Config;
      clock: Clock;
      log: Logger;
      /** Why the single-agent lock is not held, or its pid not written: said by /readyz. */
      lockProblem?: string;
      /** The loop's timers; a test may drive them itself. */
      timers?: Timers;
      /** How the manifest dirs are watched; a test may make it fail. */
      watchFs?: WatchFs;
      /** What gives memory back between passes; a test may count its collections. */
      heap?: HeapTrimmer;
    },
  ) {
    this.#heap = opts.heap ?? new HeapTrimmer();
    this.agent = opts.agent;
    this.stores = opts.stores;
    this.config = opts.config;
    this.#clock = opts.clock;
    this.#log = opts.log;
    this.#lockProblem = opts.lockProblem;
    this.#watchFs = opts.watchFs;
    this.startedAt = opts.clock.now();
    this.#scheduler = new PassScheduler({
      run: (cause) => this.#pass(cause),
      pollIntervalMs: opts.config.pollIntervalMs,
      timers: opts.timers,
      log: opts.log,
    });
    const passes = new PassLog(opts.log, opts.clock);
    this.onPass((report, cause) => passes.passed(report, cause));
  }

  /** Told of every pass, with what asked for it. The listener must never throw. */
  onPass(listener: PassListener) {
    this.#listeners.push(listener);
  }

  /** Runs a pass that starts after this call, after any pass under way; writes, persists, and
   *  tells the listeners. Triggers waiting at that moment are answered by the same pass. */
  runPass(reason = "request"): Promise<PassReport> {
    return this.#scheduler.request(reason);
  }

  /**
   * Runs `work` when no pass is under way, and holds the next pass until it ends: for the
   * operator's verbs (lib/pass/verbs.ts), which change what a pass reads.
   */
  between<T>(work: () => Promise<T>): Promise<T> {
    return this.#scheduler.between(work);
  }

  async #pass(cause: PassCause): Promise<PassReport> {
    this.#passStartedAt = this.#clock.now();
    const cut = this.#cut = new AbortController();
    let report: PassReport;
    try {
      report = await this.agent.pass(this.stores, {
        dirsQuiet: this.#dirs?.quiet,
        heard: this.#heard,
        poll: cause.trigger === "poll" && cause.triggers === 1,
        cut: cut.signal,
      });
    } finally {
      this.#passStartedAt = undefined;
      this.#cut = undefined;
    }
    if (!report.idle) {
      this.#readOnlyDirs = readOnlyDirs(CHECKPOINT_DIRS.map((d) => this.config[d.key]));
    }
    this.#scheduler.setPollInterval(
      outagePolls(report) ? OUTAGE_POLL_MS : this.config.pollIntervalMs,
    );
    const now = this.#clock.now();
    this.lastTick = now;
    this.lastReport = report;
    if (report.complete) this.lastCompletePassAt = now;
    this.#armDeadline(report, now);
    this.#dirs?.check();
    for (const listener of this.#listeners) listener(report, cause);
    // A pass cut short is followed at once by the pass that activates (or withdraws) the
    // copies: a full collection here (a second, at 1,000 parents) would hold that pass back.
    // The next pass's end collects instead. An idle pass made next to no garbage.
    if (!cut.signal.aborted && !report.idle) this.#heap.trim();
    return report;
  }

  /** A timer for the next deadline the pass left (deadlines.ts); ignored outside the loop. */
  #armDeadline(report: PassReport, now: Instant) {
    const next = nextDeadline({
      report,
      records: this.stores.status.peekAll(),
      startTimeoutMs: this.config.startTimeoutMs,
    });
    // Rounded up: a timer that fires a little early would find the deadline still ahead.
    const delayMs = next && Math.ceil(Number(next.at - now) / Number(NANOS_PER_MILLI));
    this.#scheduler.setDeadline(delayMs, next?.reason ?? "");
  }

  /** Whether the daemon was made at least `ms` ago. */
  startedFor(ms: number): boolean {
    return this.#clock.now() - this.startedAt >= millisToDuration(ms);
  }

  /** Whether the loop is still going, for the systemd watchdog (see probes.ts). */
  loopAlive(): boolean {
    return loopAlive(this.#clock.now(), {
      passStartedAt: this.#passStartedAt,
      lastTick: this.lastTick,
      startedAt: this.startedAt,
      pollIntervalMs: this.config.pollIntervalMs,
      passDeadlineMs: passDeadlineMs(this.config),
    });
  }

  /** Whether the node is protected now, as of the last pass (see probes.ts). */
  readiness(): Readiness {
    return readiness({
      config: this.config,
      lastReport: this.lastReport,
      lastPassAt: this.lastTick,
      lastCompletePassAt: this.lastCompletePassAt,
      readOnlyDirs: this.#readOnlyDirs,
      unrecorded: this.stores.unrecorded(),
      stateReadOnly: this.stores.readOnly,
      lockProblem: this.#lockProblem,
    });
  }

  /** What the next pass would do, without writing anything. */
  dryRun(): Promise<PassReport> {
    return this.agent.plan(trackedFromStore(this.stores.status));
  }

  /**
   * Passes on what the sources tell (their ChangeFeed), on changes in the static-pod and inactive
   * dirs, at deadlines and every poll interval, until `signal` aborts; then the timers, the
   * watch and the subscription stop, and the pass under way finishes.
   */
  async loop(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    const scheduler = this.#scheduler;
    if (this.agent.changes) this.#heard = 0;
    const unsubscribe = this.agent.changes?.subscribe((reason) => {
      this.#heard!++;
      // The pass under way planned with the API server there (or not): what it has not started
      // yet waits for the next pass, which activates the copies (or withdraws them), rather than
      // that pass waiting for it.
      const reachability = REACHABILITY.has(reason);
      if (reachability) this.#cut?.abort();
      scheduler.trigger(reachability ? "apiserver" : "change", reason);
    });
    const dirs = new DirWatcher({
      dirs: [this.config.staticPodDir, this.config.inactiveDir],
      onChange: (reason) => scheduler.trigger("files", reason),
      log: this.#log,
      watchFs: this.#watchFs,
    });
    // Before the first pass: a change made while it runs is then not missed.
    dirs.check();
    this.#dirs = dirs;
    scheduler.start();
    await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    unsubscribe?.();
    this.#heard = undefined;
    dirs.close();
    this.#dirs = undefined;
    await scheduler.stop();
  }
}
