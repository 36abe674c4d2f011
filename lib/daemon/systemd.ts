/**
 * The daemon as a `Type=notify` service (systemd/ckpt-agent.service): READY=1 once the first pass
 * has ended, complete or not (an agent started in an outage is doing its job); STATUS= with a
 * one-line summary after each pass that changes it; WATCHDOG=1 while the loop is alive; STOPPING=1 when it is
 * told to stop. Without NOTIFY_SOCKET nothing of this exists.
 *
 * The watchdog pings come from a timer, every third of the watchdog period, and only while the
 * daemon's loop is alive (Daemon.loopAlive: a pass under way within its deadline, or the next pass
 * due). A free-running timer would keep a dead loop alive; a ping at the end of each pass would
 * need a watchdog period longer than the longest pass, minutes when a peer hangs, and would still
 * kill an agent whose pass is only waiting on a deadline. So systemd's WatchdogSec= only has to
 * cover a blocked process, and the loop's own bound decides when the pings stop.
 *
 * Before READY=1, once the start has taken a watchdog period, the same timer extends the start
 * timeout instead (EXTEND_TIMEOUT_USEC, by one period): a first pass waiting on a hung runtime is
 * not killed by TimeoutStartSec=, and a first pass that stalls is, as a running loop would be. A
 * quick start sends none.
 *
 * A notification that cannot be sent is said once at warn (and once at info when they go through
 * again): it never stops or slows the daemon.
 */
import type { PassReport } from "../pass/report.ts";
import type { StatusState } from "../store/status_record.ts";
import type { Logger } from "../util/log.ts";
import type { Daemon } from "./daemon.ts";
import { notifyAddress, NotifySocket } from "./notify_socket.ts";
import { lastPassFailures, type NotReadyReason } from "./probes.ts";

/** The watchdog period when systemd gives none: the unit's WatchdogSec=. */
export const DEFAULT_WATCHDOG_MS = 30_000;

/** Pings per watchdog period: one late timer still leaves a ping within it. */
export const PINGS_PER_PERIOD = 3;

/** However short a period systemd asks for, the timer never spins. */
const MIN_PING_INTERVAL_MS = 10;

/** Messages waiting behind one that does not go out (systemd's queue full) before more are dropped. */
const MAX_PENDING = 16;

/** What systemd puts in a service's environment. */
export interface SystemdEnv {
  NOTIFY_SOCKET?: string;
  WATCHDOG_USEC?: string;
  WATCHDOG_PID?: string;
}

/** Calls `fn` every `ms` until the returned function is called. */
export type Every = (ms: number, fn: () => void) => () => void;

const realEvery: Every = (ms, fn) => {
  const timer = setInterval(fn, ms);
  return () => clearInterval(timer);
};

export interface SystemdOptions {
  daemon: Daemon;
  env: SystemdEnv;
  /** This process: WATCHDOG_USEC counts only when WATCHDOG_PID is unset or names it. */
  pid: number;
  log: Logger;
  /** The keep-alive timer; a test may drive it itself. */
  every?: Every;
}

/** The watchdog period systemd asked for, when the environment gives one for this process. */
export function watchdogMs(env: SystemdEnv, pid: number, log: Logger): number {
  if (env.WATCHDOG_USEC === undefined) return DEFAULT_WATCHDOG_MS;
  if (env.WATCHDOG_PID !== undefined && env.WATCHDOG_PID !== String(pid)) {
    return DEFAULT_WATCHDOG_MS;
  }
  const usec = /^[1-9][0-9]*$/.test(env.WATCHDOG_USEC) ? Number(env.WATCHDOG_USEC) : NaN;
  if (!Number.isSafeInteger(usec)) {
    log.warn("systemd: WATCHDOG_USEC is not a number of microseconds; the default is used", {
      WATCHDOG_USEC: env.WATCHDOG_USEC,
      watchdogMs: DEFAULT_WATCHDOG_MS,
    });
    return DEFAULT_WATCHDOG_MS;
  }
  return usec / 1000;
}

/** The order STATUS counts checkpoints in: those served from copies first. Every state. */
export const STATUS_ORDER: readonly StatusState[] = [
  "active",
  "active-grace",
  "self-checkpoint",
  "inactive-grace",
  "inactive",
  "none",
];

/**
 * One line on the last pass: checkpoints by state, the parents crash-looping on an unproven spec
 * (which is why copies run while the API server answers), then the sources that failed and the
 * writes, the stalled starts, and why the node is not protected if it is not, e.g. `2 active,
 * 1 inactive; apiserver unreachable`, `1 active, 2 inactive; 1 parent crash-looping` or
 * `3 inactive; 1 write(s) failed; not ready: static-pod-dir`.
 */
export function statusLine(
  states: readonly StatusState[],
  report: PassReport,
  notReady: readonly NotReadyReason[],
): string {
  const counts = STATUS_ORDER
    .map((state) => [state, states.filter((s) => s === state).length] as const)
    .filter(([, n]) => n > 0)
    .map(([state, n]) => `${n} ${state}`);
  const parts = [counts.length > 0 ? counts.join(", ") : "no checkpoints"];
  const looping = Object.keys(report.crashLooping).length;
  if (looping > 0) {
    parts.push(`${looping} ${looping === 1 ? "parent" : "parents"} crash-looping`);
  }
  const failures = lastPassFailures(report);
  if (failures.length > 0) parts.push(failures.join(", "));
  const stalled = report.stalledStarts.length;
  if (stalled > 0) parts.push(`${stalled} stalled start${stalled === 1 ? "" : "s"}`);
  const reasons = notReady.filter((reason) => reason !== "stalled-start");
  if (reasons.length > 0) parts.push(`not ready: ${reasons.join(", ")}`);
  return parts.join("; ");
}

export class SystemdNotifier {
  readonly #daemon: Daemon;
  readonly #socket: NotifySocket;
  readonly #log: Logger;
  readonly #watchdogMs: number;
  #phase: "starting" | "ready" | "stopping" = "starting";
  #queue: Promise<void> = Promise.resolve();
  #pending = 0;
  #failing = false;
  /** Whether the last keep-alive found the loop alive. */
  #alive = true;
  /** The last STATUS= sent: systemd keeps it, so an unchanged line is not sent again. */
  #status: string | undefined;
  readonly #stopTimer: () => void;

  /** Undefined when there is no systemd to tell (no NOTIFY_SOCKET) or no way to reach it. */
  static start(opts: SystemdOptions): SystemdNotifier | undefined {
    const value = opts.env.NOTIFY_SOCKET;
    if (value === undefined || value === "") return undefined;
    const address = notifyAddress(value);
    if ("problem" in address) {
      opts.log.warn("systemd: not notified", { error: address.problem });
      return undefined;
    }
    return new SystemdNotifier(opts, new NotifySocket(address));
  }

  private constructor(opts: SystemdOptions, socket: NotifySocket) {
    this.#daemon = opts.daemon;
    this.#socket = socket;
    this.#log = opts.log;
    this.#watchdogMs = watchdogMs(opts.env, opts.pid, opts.log);
    const intervalMs = Math.max(MIN_PING_INTERVAL_MS, this.#watchdogMs / PINGS_PER_PERIOD);
    this.#stopTimer = (opts.every ?? realEvery)(intervalMs, () => void this.keepAlive());
    // The listener must never throw: it runs inside the daemon's pass.
    opts.daemon.onPass((report) => this.#passed(report));
    opts.log.info("systemd: notifying", {
      socket: socket.address.shown,
      watchdogMs: this.#watchdogMs,
      pingEveryMs: intervalMs,
    });
  }

  /**
   * One tick of the keep-alive timer: WATCHDOG=1 (before READY=1, EXTEND_TIMEOUT_USEC once the
   * start is slow) if the loop is alive, nothing if not. Resolves once what it sent is out.
   */
  keepAlive(): Promise<void> {
    if (this.#phase === "stopping") return this.#queue;
    if (this.#phase === "starting" && !this.#daemon.startedFor(this.#watchdogMs)) {
      return this.#queue;
    }
    const alive = this.#daemon.loopAlive();
    if (alive !== this.#alive) {
      this.#alive = alive;
      if (alive) this.#log.info("systemd: the loop goes on again; watchdog pings resumed");
      else {
        this.#log.error("systemd: the loop has stalled; watchdog pings stopped", {
          watchdogMs: this.#watchdogMs,
        });
      }
    }
    if (!alive) return this.#queue;
    return this.#send(
      this.#phase === "ready" ? "WATCHDOG=1" : `EXTEND_TIMEOUT_USEC=${this.#watchdogMs * 1000}`,
    );
  }

  #passed(report: PassReport) {
    if (this.#phase === "stopping") return;
    const first = this.#phase === "starting";
    if (first) {
      this.#phase = "ready";
      void this.#send("READY=1");
    }
    const states = this.#daemon.stores.status.peekAll().map((record) => record.state);
    const notReady = this.#daemon.readiness().notReady.map((n) => n.reason);
    const status = `STATUS=${statusLine(states, report, notReady)}`;
    if (status !== this.#status) {
      this.#status = status;
      void this.#send(status);
    }
    if (first) void this.keepAlive();
  }

  /** The daemon begins to stop: STOPPING=1, and no more pings. */
  stopping() {
    if (this.#phase === "stopping") return;
    this.#phase = "stopping";
    this.#stopTimer();
    void this.#send("STOPPING=1");
  }

  /** Resolves once every notification so far is out (or failed). */
  flushed(): Promise<void> {
    return this.#queue;
  }

  /** Waits (at most `waitMs`) for what is queued to go out, then closes the socket. */
  async close(waitMs = 1_000) {
    this.#phase = "stopping";
    this.#stopTimer();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<void>((resolve) => timer = setTimeout(resolve, waitMs));
    await Promise.race([this.flushed(), late]);
    clearTimeout(timer);
    this.#socket.close();
  }

  #send(message: string): Promise<void> {
    if (this.#pending >= MAX_PENDING) {
      this.#log.debug("systemd: notification dropped: earlier ones are not out yet", { message });
      return this.#queue;
    }
    this.#pending++;
    this.#queue = this.#queue
      .then(() => this.#socket.send(message))
      .then(() => this.#sent(), (e) => this.#failed(message, e as Error))
      .finally(() => this.#pending--);
    return this.#queue;
  }

  #sent() {
    if (!this.#failing) return;
    this.#failing = false;
    this.#log.info("systemd: notifications go through again", {
      socket: this.#socket.address.shown,
    });
  }

  #failed(message: string, error: Error) {
    const fields = { socket: this.#socket.address.shown, message, error: error.message };
    if (this.#failing) return this.#log.debug("systemd: notification not sent", fields);
    this.#failing = true;
    this.#log.warn("systemd: notification not sent; systemd may restart the agent", fields);
  }
}
