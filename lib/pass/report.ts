/**
 * What a pass reports: what it observed and planned, what it wrote, and what failed. The daemon,
 * the admin endpoint, the commands and the demo read it; only the pass (lib/pass/agent.ts) makes
 * one.
 */
import type { Observations, PassResult } from "../core/pass.ts";
import { explainChange } from "../core/reasons.ts";
import { type PlanDocument, planDocument } from "../core/snapshot.ts";
import { formatInstant, type Instant } from "../core/time.ts";
import type { SourceFailure } from "../sources/types.ts";
import { type MissingPermission, missingPermission } from "../util/permission.ts";
import type { StalledStart } from "./stalls.ts";

export interface AppliedAction {
  op:
    | "checkpoint"
    | "promote"
    | "inherit"
    | "files"
    | "start"
    | "stop"
    | "remove"
    | "sandbox-record"
    | "sandbox-forget";
  id: string;
  detail?: string;
}

/** What a pass writes, as its errors name it: checkpoint writes, then records (RECORD_OPS). */
export type WriteOp = "checkpoint" | "start" | "stop" | "remove" | typeof RECORD_OPS[number];

export interface PassError {
  op: WriteOp;
  id?: string;
  message: string;
}

/** Where a pass met a permission the agent runs without: a source, or its own writes. */
export const PERMISSION_ERROR_PLACES = ["apiserver", "kubelet", "runtime", "pass"] as const;

export interface PermissionError extends MissingPermission {
  where: typeof PERMISSION_ERROR_PLACES[number];
  /** The failure or error as it was reported. */
  message: string;
}

/** The permissions a pass found missing, each with where (docs/design.md#own-failures). */
export function permissionErrors(report: Pick<PassReport, "failures" | "errors">) {
  const found: PermissionError[] = [];
  for (const failure of report.failures) {
    const missing = failure.kind === "not-permitted"
      ? missingPermission(failure.message)
      : undefined;
    if (missing) found.push({ where: failure.source, message: failure.message, ...missing });
  }
  for (const error of report.errors) {
    const missing = missingPermission(error.message);
    if (missing) {
      found.push({
        where: "pass",
        message: `${error.op} ${error.id ?? ""}: ${error.message}`,
        ...missing,
      });
    }
  }
  return found;
}

export interface PassReport {
  startedAt: string;
  durationMs: number;
  /** A complete pass: every source answered and every write succeeded. */
  complete: boolean;
  failures: SourceFailure[];
  plan: PlanDocument;
  /**
   * The parents this pass judged crash-looping on an unproven spec (lib/pass/crash_loops.ts),
   * by id, with the version their checkpoint keeps: what the planner was told (the snapshot's
   * `crashLooping`), and what the metrics, STATUS and the checkpoint views show of it.
   */
  crashLooping: Record<string, number>;
  changes: { id: string; from: string; to: string; reason: string; message: string }[];
  applied: AppliedAction[];
  errors: PassError[];
  /** Everything the pass wrote: manifests, stored files, status and sandbox records. */
  bytesWritten: number;
  /**
   * Checkpoints active for startTimeout whose copy does not run (stalls.ts); empty when the
   * runtime did not answer, and in a dry run.
   */
  stalledStarts: StalledStart[];
  /**
   * Set when the pass was cut short (the daemon's `cut`, on the API server's loss): how many
   * checkpoint writes and records it left to the next pass, which runs at once.
   */
  leftToNextPass?: { checkpoints: number; records: number };
  /**
   * Set when the pass was a poll that found the kubelet and the runtime answering as before and
   * nothing else told of a change: it did nothing else, and reports what the last pass did
   * (lib/pass/agent.ts, #idlePass).
   */
  idle?: true;
}

/** The pass-error ops of records the state dir could not take; the others are checkpoint writes. */
export const RECORD_OPS = ["status", "sandbox-record", "sandbox-forget"] as const;

/**
 * The report of a pass as planned: nothing applied yet, complete if every source answered;
 * `crashLooping` as the planner was told.
 */
export function plannedReport(
  started: Instant,
  failures: SourceFailure[],
  result: PassResult,
  crashLooping?: Observations["crashLooping"],
): PassReport {
  return {
    startedAt: formatInstant(started),
    durationMs: 0,
    complete: failures.length === 0,
    failures,
    plan: planDocument(result),
    crashLooping: { ...crashLooping },
    changes: result.changes.map((change) => ({
      id: change.id,
      from: change.from.name,
      to: change.to.name,
      ...explainChange(change),
    })),
    applied: [],
    errors: [],
    bytesWritten: 0,
    stalledStarts: [],
  };
}
