/**
 * Liveness and readiness of the daemon, as /healthz and /readyz report them. Pure: the time and
 * the daemon's heartbeat come in as arguments.
 */
import type { PassReport } from "../agent.ts";
import { formatInstant, type Instant, NANOS_PER_MILLI } from "../core/time.ts";

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
  const limit = BigInt(STALL_INTERVALS * heartbeat.pollIntervalMs) * NANOS_PER_MILLI;
  return {
    healthy: since <= limit,
    ...(heartbeat.lastTick !== undefined ? { lastTick: formatInstant(heartbeat.lastTick) } : {}),
    secondsSinceTick: Number(since / NANOS_PER_MILLI) / 1000,
    limitSeconds: Number(limit / NANOS_PER_MILLI) / 1000,
  };
}

export type Readiness =
  | { ready: true; lastCompletePassAt: string; lastPassComplete: boolean }
  | { ready: false; reason: string };

function degradation(report: PassReport): string {
  const parts = report.failures.map((f) => `${f.source} ${f.kind}`);
  if (report.errors.length > 0) parts.push(`${report.errors.length} write(s) failed`);
  return parts.join(", ");
}

/**
 * Ready once a complete pass has run. A later degraded pass (the API server down is the outage
 * this agent exists for) does not take readiness back; `lastPassComplete` and the metrics say
 * how the latest pass went.
 */
export function readiness(
  lastReport: PassReport | undefined,
  lastCompletePassAt: Instant | undefined,
): Readiness {
  if (lastCompletePassAt !== undefined) {
    return {
      ready: true,
      lastCompletePassAt: formatInstant(lastCompletePassAt),
      lastPassComplete: lastReport?.complete ?? true,
    };
  }
  if (lastReport === undefined) return { ready: false, reason: "no pass has finished yet" };
  return {
    ready: false,
    reason: `no complete pass yet; the last pass was degraded: ${degradation(lastReport)}`,
  };
}
