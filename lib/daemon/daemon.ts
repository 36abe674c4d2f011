/**
 * The daemon around the agent: a pass every poll interval, one pass at a time (the loop and
 * `POST /v1/reconcile` share it), and what the admin endpoint reports about the loop.
 */
import { CHECKPOINT_DIRS, loopAlive, passDeadlineMs, type Readiness, readiness } from "./probes.ts";
import { Agent } from "../pass/agent.ts";
import { trackedFromStore } from "../pass/observe.ts";
import type { PassReport } from "../pass/report.ts";
import type { Config } from "../config/types.ts";
import { type Clock, type Instant, millisToDuration } from "../core/time.ts";
import { readOnlyDirs } from "../disk/mounts.ts";
import type { Logger } from "../util/log.ts";
import { HeapTrimmer } from "./memory.ts";
import type { AgentStores } from "../store/agent_stores.ts";

export type PassListener = (report: PassReport) => void;

export class Daemon {
  readonly agent: Agent;
  readonly stores: AgentStores;
  readonly config: Config;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #listeners: PassListener[] = [];
  readonly #heap = new HeapTrimmer();
  /** The pass under way (or the last one): passes queue behind it. */
  #current: Promise<unknown> = Promise.resolve();
  /** When the daemon was made: the heartbeat is measured from here until the first pass. */
  readonly startedAt: Instant;
  /** When the pass under way started; undefined between passes. */
  #passStartedAt?: Instant;
  /** When a pass last finished, complete or not: the loop's heartbeat. */
  lastTick?: Instant;
  lastReport?: PassReport;
  lastCompletePassAt?: Instant;
  /** Checkpoint directories on a read-only mount, checked after each pass. */
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
    },
  ) {
    this.agent = opts.agent;
    this.stores = opts.stores;
    this.config = opts.config;
    this.#clock = opts.clock;
    this.#log = opts.log;
    this.#lockProblem = opts.lockProblem;
    this.startedAt = opts.clock.now();
  }

  onPass(listener: PassListener) {
    this.#listeners.push(listener);
  }

  /** Runs a pass after any pass under way; writes, persists, and tells the listeners. */
  runPass(): Promise<PassReport> {
    return this.between(() => this.#pass());
  }

  /**
   * Runs `work` when no pass is under way, and holds the next pass until it ends: for the
   * operator's verbs (lib/pass/verbs.ts), which change what a pass reads.
   */
  between<T>(work: () => Promise<T>): Promise<T> {
    const next = this.#current.then(work);
    this.#current = next.catch(() => {});
    return next;
  }

  async #pass(): Promise<PassReport> {
    this.#passStartedAt = this.#clock.now();
    let report: PassReport;
    try {
      report = await this.agent.pass(this.stores);
    } finally {
      this.#passStartedAt = undefined;
    }
    this.#readOnlyDirs = readOnlyDirs(CHECKPOINT_DIRS.map((d) => this.config[d.key]));
    const now = this.#clock.now();
    this.lastTick = now;
    this.lastReport = report;
    if (report.complete) this.lastCompletePassAt = now;
    for (const listener of this.#listeners) listener(report);
    return report;
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

  /** Passes every poll interval until `signal` aborts; the pass under way always finishes. */
  async loop(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        await this.runPass();
      } catch (e) {
        // A pass never throws by design; if one does, the loop must still go on.
        this.#log.error("pass failed", { error: e as Error });
      }
      this.#heap.trim();
      await sleep(this.config.pollIntervalMs, signal);
    }
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
}
