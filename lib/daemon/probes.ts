/**
 * Liveness and readiness of the daemon, as /healthz and /readyz report them. Pure: the time, the
 * daemon's heartbeat and what the last pass found come in as arguments.
 *
 * Ready means "this node is protected right now": the last pass could ask the container runtime,
 * the agent's configuration is accepted, every checkpoint directory can be written, and no
 * checkpoint the agent activated has gone startTimeout without a running copy. The API
 * server being unavailable is the outage the agent exists for and never takes readiness away,
 * not even before a first complete pass; a state dir that cannot be written does not either
 * (activation does not need it), but the body names what is not recorded.
 */
import { type PassReport, permissionErrors, RECORD_OPS } from "../pass/report.ts";
import type { StalledStart } from "../pass/stalls.ts";
import type { Config } from "../config/types.ts";
import { formatInstant, type Instant, millisToDuration, NANOS_PER_MILLI } from "../core/time.ts";
import { CHANGED_BY_OTHERS } from "../disk/dirs.ts";
import type { Unrecorded } from "../store/agent_stores.ts";
import { isConfigurationFailure, type SourceFailure } from "../sources/types.ts";

/** The loop is stalled when it has not ticked for this many poll intervals. */
export const STALL_INTERVALS = 3;

export interface Liveness {
  healthy: boolean;
  /** When the last pass ended; undefined before the first. */
  lastTick?: string;
  secondsSinceTick: number;
  limitSeconds: number;
}

/** Before the first pass ends, the heartbeat is measured from the daemon's start. */
export function liveness(
  now: Instant,
  heartbeat: { lastTick?: Instant; startedAt: Instant; pollIntervalMs: number },
): Liveness {
  const since = now - (heartbeat.lastTick ?? heartbeat.startedAt);
  const limit = millisToDuration(STALL_INTERVALS * heartbeat.pollIntervalMs);
  return {
    healthy: since <= limit,
    ...(heartbeat.lastTick !== undefined ? { lastTick: formatInstant(heartbeat.lastTick) } : {}),
    secondsSinceTick: Number(since / NANOS_PER_MILLI) / 1000,
    limitSeconds: Number(limit / NANOS_PER_MILLI) / 1000,
  };
}

/** What the disk and the CPU may add to a pass whose peers all answered at their deadlines. */
export const PASS_SLACK_MS = 60_000;

/**
 * The longest a pass may take when every peer answers only at its deadline: observing waits for
 * the slowest source (the runtime's version probe and then its listing, the kubelet's two ports,
 * the API server's list), refreshing secrets and configmaps for one API server timeout (the first
 * one ends the refresh for that pass), recording the sandbox of a newly active checkpoint for one
 * runtime call; plus PASS_SLACK_MS. With the default timeouts, 7m10s.
 */
export function passDeadlineMs(
  config: Pick<Config, "runtimeRequestTimeoutMs" | "kubeletTimeoutMs" | "apiTimeoutMs">,
): number {
  const observe = Math.max(
    2 * config.runtimeRequestTimeoutMs,
    2 * config.kubeletTimeoutMs,
    config.apiTimeoutMs,
  );
  return observe + config.apiTimeoutMs + config.runtimeRequestTimeoutMs + PASS_SLACK_MS;
}

export interface LoopHeartbeat {
  /** When the pass under way started; undefined between passes. */
  passStartedAt?: Instant;
  /** When the last pass ended; undefined before the first. */
  lastTick?: Instant;
  startedAt: Instant;
  pollIntervalMs: number;
  passDeadlineMs: number;
}

/**
 * Whether the loop is still going, as the systemd watchdog needs it: a pass under way has not
 * outrun passDeadlineMs, or between passes the next one is due within STALL_INTERVALS poll
 * intervals (as /healthz says). Unlike /healthz, a pass that waits on a peer's deadline is alive:
 * killing the agent then would only make its next pass wait on the same peer.
 */
export function loopAlive(now: Instant, heartbeat: LoopHeartbeat): boolean {
  if (heartbeat.passStartedAt !== undefined) {
    return now - heartbeat.passStartedAt <= millisToDuration(heartbeat.passDeadlineMs);
  }
  return liveness(now, heartbeat).healthy;
}

/** The directories a checkpoint is written to, each with its reason for being unready. */
export const CHECKPOINT_DIRS = [
  { key: "staticPodDir", reason: "static-pod-dir", label: "static-pod dir" },
  { key: "inactiveDir", reason: "inactive-dir", label: "inactive dir" },
  { key: "secretsDir", reason: "secrets-dir", label: "secrets dir" },
  { key: "configmapsDir", reason: "configmaps-dir", label: "configmaps dir" },
] as const satisfies readonly { key: keyof Config; reason: string; label: string }[];

/** Why the node may not be protected: what `ckpt_agent_not_ready{reason}` is labelled with. */
export const NOT_READY_REASONS = [
  "no-pass",
  "permission",
  "runtime",
  "configuration",
  ...CHECKPOINT_DIRS.map((d) => d.reason),
  "checkpoint-writes",
  "stalled-start",
] as const;
export type NotReadyReason = typeof NOT_READY_REASONS[number];

export interface NotReady {
  reason: NotReadyReason;
  /** One line naming the source or directory, and what is wrong with it. */
  message: string;
}

export interface ReadinessInput {
  config: Pick<Config, typeof CHECKPOINT_DIRS[number]["key"] | "stateDir">;
  /** The last pass's report and when it ended; undefined before the first. */
  lastReport?: PassReport;
  lastPassAt?: Instant;
  lastCompletePassAt?: Instant;
  /** Checkpoint directories found on a read-only mount after the last pass, with why. */
  readOnlyDirs: ReadonlyMap<string, string>;
  /** What the state dir could not take in the last pass, and why its stores are read-only. */
  unrecorded: readonly Unrecorded[];
  stateReadOnly?: string;
  /** Why the single-agent lock is not held, or its pid not written. */
  lockProblem?: string;
}

export interface Readiness {
  ready: boolean;
  /** Empty exactly when ready. */
  notReady: NotReady[];
  lastPassAt?: string;
  lastPassComplete?: boolean;
  lastCompletePassAt?: string;
  /** Sources that failed in the last pass, as `source kind`, and failed writes. */
  lastPassFailures: string[];
  /** Checkpoints active for startTimeout whose copy does not run, as of the last pass. */
  stalledStarts: StalledStart[];
  notRecorded: {
    checkpoints: string[];
    sandboxes: string[];
    /** The first record's file and error, when any. */
    path?: string;
    error?: string;
  };
  stateDirReadOnly?: string;
  lockProblem?: string;
}

/**
 * Errors that say a directory refuses writes, not that one checkpoint is wrong: EPERM, EIO,
 * EACCES, ENOTDIR (a file where a directory belongs), ENOSPC, EROFS, EDQUOT, as Deno words them;
 * a configured directory others can write, below which nothing is written (lib/disk/dirs.ts).
 */
const UNWRITABLE = new RegExp(`\\(os error (1|5|13|20|28|30|122)\\)|${CHANGED_BY_OTHERS}`);

/** Whether an error message names `dir` or a path inside it (Deno quotes paths in '). */
function names(message: string, dir: string): boolean {
  return message.includes(`'${dir}'`) || message.includes(`${dir}/`);
}

/** A configuration failure: credentials or a kubeconfig the agent cannot use. */
function isMisconfigured(failure: SourceFailure, apiAvailable: boolean): boolean {
  // The kubelet authorizes through the API server: its refusals during an outage are the outage.
  return isConfigurationFailure(failure) && (failure.source !== "kubelet" || apiAvailable);
}

/**
 * The checkpoint writes of the last pass that failed because their file system refused them,
 * each put down to the directory whose path the error names, else to the one directory its
 * operation writes (start and stop: the static-pod dir), else to checkpoint writes in general.
 */
function failedDirWrites(input: ReadinessInput): NotReady[] {
  const out = new Map<NotReadyReason, NotReady>();
  for (const error of input.lastReport?.errors ?? []) {
    if ((RECORD_OPS as readonly string[]).includes(error.op)) continue;
    if (!UNWRITABLE.test(error.message)) continue;
    const what = `${error.op} ${error.id ?? ""}: ${error.message}`;
    const named = CHECKPOINT_DIRS.filter((d) => names(error.message, input.config[d.key]))
      .sort((a, b) => input.config[b.key].length - input.config[a.key].length)[0];
    const dir = named ?? (error.op === "start" || error.op === "stop" ? CHECKPOINT_DIRS[0] : null);
    const entry = dir
      ? {
        reason: dir.reason,
        message: `${dir.label} ${input.config[dir.key]}: the last pass could not write it: ${what}`,
      }
      : {
        reason: "checkpoint-writes" as const,
        message: `checkpoint files could not be written in the last pass: ${what}`,
      };
    if (!out.has(entry.reason)) out.set(entry.reason, entry);
  }
  return [...out.values()];
}

function notReady(input: ReadinessInput): NotReady[] {
  const report = input.lastReport;
  if (report === undefined) return [{ reason: "no-pass", message: "no pass has finished yet" }];
  const found: NotReady[] = [];
  const apiAvailable = !report.failures.some((f) => f.source === "apiserver");
  for (const missing of permissionErrors(report)) {
    found.push({
      reason: "permission",
      message: `${missing.where}: ${missing.permission} denied: run the agent with ` +
        `${missing.flag} (every checkpoint holds its state meanwhile): ${missing.message}`,
    });
  }
  for (const failure of report.failures) {
    const said = `${failure.source} ${failure.kind}: ${failure.message}`;
    if (failure.kind === "not-permitted") continue;
    if (failure.source === "runtime") {
      found.push({
        reason: "runtime",
        message: `${said} (the runtime cannot say what runs, so nothing is activated)`,
      });
    } else if (isMisconfigured(failure, apiAvailable)) {
      found.push({
        reason: "configuration",
        message: `${said} (the agent cannot tell whether parents exist: fix its configuration)`,
      });
    }
  }
  for (const dir of CHECKPOINT_DIRS) {
    const path = input.config[dir.key];
    const readOnly = input.readOnlyDirs.get(path);
    if (readOnly) {
      found.push({ reason: dir.reason, message: `${dir.label} ${path}: ${readOnly}` });
    }
  }
  for (const failed of failedDirWrites(input)) {
    if (!found.some((f) => f.reason === failed.reason)) found.push(failed);
  }
  if (report.stalledStarts.length > 0) {
    const which = report.stalledStarts.map((s) => `${s.id} (active since ${s.activeSince})`);
    found.push({
      reason: "stalled-start",
      message: `no copy runs of ${which.join(", ")} (the kubelet did not start what was ` +
        "handed to it: the log names the likely causes)",
    });
  }
  return found;
}

/** The sources that failed in a pass, as `source kind`, and how many writes failed. */
export function lastPassFailures(report: PassReport | undefined): string[] {
  if (!report) return [];
  const parts = report.failures.map((f) => `${f.source} ${f.kind}`);
  if (report.errors.length > 0) parts.push(`${report.errors.length} write(s) failed`);
  return parts;
}

export function readiness(input: ReadinessInput): Readiness {
  const found = notReady(input);
  const { lastReport: report, unrecorded } = input;
  const keys = (store: Unrecorded["store"]) =>
    unrecorded.filter((u) => u.store === store).map((u) => u.key);
  return {
    ready: found.length === 0,
    notReady: found,
    ...(input.lastPassAt !== undefined ? { lastPassAt: formatInstant(input.lastPassAt) } : {}),
    ...(report ? { lastPassComplete: report.complete } : {}),
    ...(input.lastCompletePassAt !== undefined
      ? { lastCompletePassAt: formatInstant(input.lastCompletePassAt) }
      : {}),
    lastPassFailures: lastPassFailures(report),
    stalledStarts: report?.stalledStarts ?? [],
    notRecorded: {
      checkpoints: keys("status"),
      sandboxes: keys("sandboxes"),
      ...(unrecorded.length > 0 ? { path: unrecorded[0].path, error: unrecorded[0].error } : {}),
    },
    ...(input.stateReadOnly !== undefined ? { stateDirReadOnly: input.stateReadOnly } : {}),
    ...(input.lockProblem !== undefined ? { lockProblem: input.lockProblem } : {}),
  };
}
