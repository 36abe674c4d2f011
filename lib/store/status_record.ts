/**
 * One checkpoint's status record: its state and grace deadline, when it was created, last
 * activated and last deactivated, and the reason and message of its last transition. Timestamps
 * are RFC 3339 strings. The lifecycle phase is derived from the timestamps on every read and never
 * stored.
 */
import * as v from "valibot";
import { strictObject } from "../core/schema.ts";
import {
  type CheckpointState,
  graceEndProblem,
  isGraceState,
  STATE_NAMES,
  type StateName,
} from "../core/state.ts";
import { parseInstant } from "../core/time.ts";
import { parseValidId } from "../core/ids.ts";
import { isStatusFileName, STATUS_DIR, statusFileName } from "./layout.ts";
import type { RecordType } from "./record_files.ts";
import type { StoreCodec } from "./record_store.ts";

/** Every state but `remove`: a removed checkpoint has no record. */
export const STATUS_STATES = STATE_NAMES.filter((s) => s !== "remove") as Exclude<
  StateName,
  "remove"
>[];
export type StatusState = typeof STATUS_STATES[number];

const Timestamp = v.pipe(
  v.string(),
  v.check(
    (text) => parseInstant(text) !== undefined,
    (issue) => `not an RFC 3339 timestamp: ${JSON.stringify(issue.input)}`,
  ),
);

const graceProblemOf = (record: { state: StateName; graceEnd?: string }) =>
  graceEndProblem(record.state, record.graceEnd !== undefined);

export const StoredStatusSchema = v.pipe(
  strictObject({
    id: v.pipe(
      v.string(),
      v.check(
        (id) => parseValidId(id) !== undefined,
        "not namespace/name with Kubernetes-valid names",
      ),
    ),
    state: v.picklist(STATUS_STATES),
    graceEnd: v.optional(Timestamp),
    createdAt: Timestamp,
    lastActivatedAt: v.optional(Timestamp),
    lastDeactivatedAt: v.optional(Timestamp),
    reason: v.string(),
    message: v.string(),
  }),
  v.forward(
    v.check((record) => !graceProblemOf(record), (issue) => graceProblemOf(issue.input)!),
    ["graceEnd"],
  ),
);

/** Exactly what is written to disk, and what the store keeps. */
export type StatusRecord = v.InferOutput<typeof StoredStatusSchema>;

export type Phase = "created" | "activated" | "deactivated";

/** What `get` and `list` return: a copy, with the phase derived from its timestamps. */
export interface StatusView extends StatusRecord {
  readonly phase: Phase;
}

/**
 * Deactivated when the last deactivation is later than the last activation (or there was no
 * activation), activated when it was ever activated, else created. Timestamps are compared as
 * instants, not as text; a tie is activated.
 */
export function phaseOf(record: StatusRecord): Phase {
  const activated = record.lastActivatedAt === undefined
    ? undefined
    : parseInstant(record.lastActivatedAt)!;
  const deactivated = record.lastDeactivatedAt === undefined
    ? undefined
    : parseInstant(record.lastDeactivatedAt)!;
  if (deactivated !== undefined && (activated === undefined || deactivated > activated)) {
    return "deactivated";
  }
  return activated !== undefined ? "activated" : "created";
}

export const STATUS_RECORDS: RecordType<StatusRecord> = {
  kind: "status",
  dir: STATUS_DIR,
  schema: StoredStatusSchema,
  fileNameOf: statusFileName,
  isFileName: isStatusFileName,
  keyOfRecord: (record) => record.id,
};

export const STATUS_CODEC: StoreCodec<StatusRecord> = {
  type: STATUS_RECORDS,
  // A view returned as it was read carries its derived phase, which is never written.
  toStored: (value) => {
    const { phase: _phase, ...stored } = value as Partial<StatusView>;
    return stored;
  },
};

/** The planner's view of a record: its state, with the deadline as an instant. */
export function stateOfRecord(record: StatusRecord): CheckpointState {
  return isGraceState(record.state)
    ? { name: record.state, graceEnd: parseInstant(record.graceEnd!)! }
    : { name: record.state };
}
