/**
 * The next instant at which a pass would decide otherwise than the last one did, though nothing
 * is observed to change: a grace period ends (lib/core/state.ts: a checkpoint in a grace state
 * keeps it while `now < graceEnd`, and is removed or activated from then on), or a started
 * checkpoint's startTimeout runs out (lib/pass/stalls.ts). The daemon arms a timer for it, so
 * the deadline is honoured when it falls and not at the next poll. Pure.
 */
import type { PassReport } from "../pass/report.ts";
import { startTimeoutEnd } from "../pass/stalls.ts";
import { actionOf } from "../core/state.ts";
import { type Instant, parseInstant } from "../core/time.ts";
import { stateOfRecord, type StatusRecord } from "../store/status_record.ts";

export interface Deadline {
  at: Instant;
  /** What falls due, for the log: `grace period of ns/name ends`. */
  reason: string;
}

export interface DeadlineInput {
  /** The last pass's report: the states it left, when it started, what it judged stalled. */
  report: Pick<PassReport, "plan" | "startedAt" | "stalledStarts">;
  /** Every status record after that pass. */
  records: readonly StatusRecord[];
  startTimeoutMs: number;
}

/**
 * The earliest deadline after the pass started; undefined when none. One the pass started after
 * was already its to decide (or not, when the runtime did not answer and every state was held):
 * only the poll looks at it again, so a held state never makes passes run back to back.
 */
export function nextDeadline(input: DeadlineInput): Deadline | undefined {
  const { report } = input;
  const startedAt = parseInstant(report.startedAt)!;
  let next: Deadline | undefined;
  const consider = (at: Instant, reason: string) => {
    if (at > startedAt && (next === undefined || at < next.at)) next = { at, reason };
  };
  for (const [id, entry] of Object.entries(report.plan.state)) {
    if (entry.graceEnd !== undefined) {
      consider(parseInstant(entry.graceEnd)!, `grace period of ${id} ends`);
    }
  }
  const stalled = new Set(report.stalledStarts.map((s) => s.id));
  for (const record of input.records) {
    if (record.lastActivatedAt === undefined || stalled.has(record.id)) continue;
    if (actionOf(stateOfRecord(record)) !== "start") continue;
    consider(
      startTimeoutEnd(record.lastActivatedAt, input.startTimeoutMs),
      `startTimeout of ${record.id} ends`,
    );
  }
  return next;
}
