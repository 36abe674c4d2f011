/**
 * The snapshot and plan documents: the public contract of `ckpt-agent plan` and
 * `ckpt-agent snapshot` (see README, "The plan contract"). The daemon plans through the same
 * documents, so what an operator replays is exactly what the agent decided.
 */
import * as v from "valibot";
import { compareIds, splitId } from "./ids.ts";
import type { PassInput, PassResult } from "./pass.ts";
import { namespacesProblem, type Pod, PodSchema } from "./pod.ts";
import { type SelfIdentity, SelfIdentitySchema } from "./self.ts";
import {
  type CheckpointState,
  graceEndProblem,
  isGraceState,
  STATE_NAMES,
  type StateName,
} from "./state.ts";
import {
  formatInstant,
  type Instant,
  LAST_INSTANT,
  parseInstant,
  secondsToDuration,
} from "./time.ts";
import { formatSchemaError } from "./schema_error.ts";
import { check, int, number, record, strictObject } from "./schema.ts";

export const DEFAULT_GRACE_PERIOD_SECONDS = 60;
/** A thousand years: far beyond any sensible grace period, and well inside a bigint's range. */
const MAX_GRACE_PERIOD_SECONDS = 1000 * 366 * 24 * 3600;

const TRACKABLE_STATES = STATE_NAMES.filter((s) => s !== "remove");

const Timestamp = v.pipe(
  v.string(),
  v.rawTransform(({ dataset, addIssue, NEVER }) => {
    const instant = parseInstant(dataset.value);
    if (instant === undefined) {
      addIssue({ message: `not an RFC 3339 timestamp: ${JSON.stringify(dataset.value)}` });
      return NEVER;
    }
    return instant;
  }),
);

const graceProblemOf = (entry: { state: string; graceEnd?: unknown }) =>
  graceEndProblem(entry.state as StateName, entry.graceEnd !== undefined);

const StateEntrySchema = v.pipe(
  strictObject({
    state: v.pipe(
      v.string(),
      v.check(
        (s) => (TRACKABLE_STATES as readonly string[]).includes(s),
        (issue) =>
          `unknown state ${JSON.stringify(issue.input)} (one of ${TRACKABLE_STATES.join(", ")})`,
      ),
    ),
    graceEnd: v.optional(Timestamp),
  }),
  v.forward(
    v.check((entry) => !graceProblemOf(entry), (issue) => graceProblemOf(issue.input)!),
    ["graceEnd"],
  ),
);

const PodList = v.array(PodSchema);

export const SnapshotSchema = v.pipe(
  strictObject({
    now: Timestamp,
    gracePeriodSeconds: v.optional(
      v.pipe(number(), v.minValue(0), v.maxValue(MAX_GRACE_PERIOD_SECONDS)),
      DEFAULT_GRACE_PERIOD_SECONDS,
    ),
    self: v.optional(SelfIdentitySchema),
    namespaces: v.optional(v.pipe(
      v.array(v.string()),
      v.check((list) => !namespacesProblem(list), (issue) => namespacesProblem(issue.input)!),
    )),
    apiAvailable: v.boolean(),
    runtimeAvailable: v.optional(v.boolean(), true),
    kubeletAvailable: v.optional(v.boolean(), true),
    kubeletVerified: v.optional(v.boolean(), true),
    ownFailure: v.optional(v.boolean()),
    localRunning: PodList,
    crashLooping: v.optional(record(v.pipe(int(), v.minValue(1)))),
    superseded: v.optional(v.array(v.pipe(
      v.string(),
      v.check((id) => splitId(id) !== undefined, "must be namespace/name"),
    ))),
    localParents: PodList,
    apiParents: PodList,
    activeCheckpoints: PodList,
    inactiveCheckpoints: PodList,
    state: v.pipe(
      v.optional(record(StateEntrySchema)),
      v.rawCheck(({ dataset, addIssue }) => {
        if (!dataset.typed || dataset.value === undefined) return;
        const state = dataset.value;
        for (const id of Object.keys(state)) {
          if (splitId(id)) continue;
          addIssue({
            message: "key must be namespace/name",
            path: [{ type: "object", origin: "key", input: state, key: id, value: state[id] }],
          });
        }
      }),
    ),
  }),
  // A grace deadline must be writable as RFC 3339 like every other timestamp. (This runs even
  // when a field's check failed: a value over the maximum is reported once, there.)
  v.forward(
    v.check(
      (s) =>
        s.gracePeriodSeconds > MAX_GRACE_PERIOD_SECONDS ||
        s.now + secondsToDuration(s.gracePeriodSeconds) <= LAST_INSTANT,
      "now + gracePeriodSeconds falls after the year 9999",
    ),
    ["gracePeriodSeconds"],
  ),
);

export type Snapshot = v.InferOutput<typeof SnapshotSchema>;

export class SnapshotError extends Error {
  override name = "SnapshotError";
}

function toState(entry: v.InferOutput<typeof StateEntrySchema>): CheckpointState {
  const name = entry.state as StateName;
  return isGraceState(name) ? { name, graceEnd: entry.graceEnd! } : { name } as CheckpointState;
}

/** Parses snapshot text; throws SnapshotError with one line naming the offending field. */
export function parseSnapshot(text: string): PassInput {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new SnapshotError(`snapshot is not JSON: ${(e as Error).message}`);
  }
  const parsed = check(SnapshotSchema, json);
  if (!parsed.success) throw new SnapshotError(formatSchemaError(SnapshotSchema, parsed.issues));
  const s = parsed.output;
  return {
    now: s.now,
    gracePeriod: secondsToDuration(s.gracePeriodSeconds),
    self: s.self,
    namespaces: s.namespaces,
    observations: {
      apiAvailable: s.apiAvailable,
      runtimeAvailable: s.runtimeAvailable,
      kubeletAvailable: s.kubeletAvailable,
      kubeletVerified: s.kubeletVerified,
      ...(s.ownFailure ? { ownFailure: true } : {}),
      localRunning: s.localRunning,
      ...(s.crashLooping ? { crashLooping: s.crashLooping } : {}),
      ...(s.superseded ? { superseded: s.superseded } : {}),
      localParents: s.localParents,
      apiParents: s.apiParents,
      activeCheckpoints: s.activeCheckpoints,
      inactiveCheckpoints: s.inactiveCheckpoints,
    },
    tracked: new Map(Object.entries(s.state ?? {}).map(([id, e]) => [id, toState(e)])),
  };
}

export interface StateEntryDocument {
  state: Exclude<StateName, "remove">;
  graceEnd?: string;
}

export function stateDocument(
  tracked: ReadonlyMap<string, CheckpointState>,
): Record<string, StateEntryDocument> {
  const out: Record<string, StateEntryDocument> = {};
  for (const id of [...tracked.keys()].sort(compareIds)) {
    const state = tracked.get(id)!;
    if (state.name === "remove") continue;
    out[id] = "graceEnd" in state
      ? { state: state.name, graceEnd: formatInstant(state.graceEnd) }
      : { state: state.name };
  }
  return out;
}

export interface PlanDocument {
  starts: string[];
  stops: string[];
  removes: string[];
  state: Record<string, StateEntryDocument>;
}

export function planDocument(result: PassResult): PlanDocument {
  return {
    starts: result.starts,
    stops: result.stops,
    removes: result.removes,
    state: stateDocument(result.tracked),
  };
}

export interface SnapshotDocument {
  now: string;
  gracePeriodSeconds: number;
  self?: SelfIdentity;
  namespaces?: string[];
  apiAvailable: boolean;
  runtimeAvailable: boolean;
  kubeletAvailable: boolean;
  kubeletVerified: boolean;
  ownFailure?: boolean;
  localRunning: Pod[];
  crashLooping?: Record<string, number>;
  superseded?: string[];
  localParents: Pod[];
  apiParents: Pod[];
  activeCheckpoints: Pod[];
  inactiveCheckpoints: Pod[];
  state: Record<string, StateEntryDocument>;
}

/** The inverse of parseSnapshot: what `ckpt-agent snapshot` prints. */
export function snapshotDocument(input: PassInput): SnapshotDocument {
  const o = input.observations;
  return {
    now: formatInstant(input.now as Instant),
    gracePeriodSeconds: Number(input.gracePeriod) / 1e9,
    ...(input.self ? { self: input.self } : {}),
    ...(input.namespaces ? { namespaces: [...input.namespaces] } : {}),
    apiAvailable: o.apiAvailable,
    runtimeAvailable: o.runtimeAvailable,
    kubeletAvailable: o.kubeletAvailable,
    kubeletVerified: o.kubeletVerified !== false,
    ...(o.ownFailure ? { ownFailure: true } : {}),
    localRunning: [...o.localRunning],
    ...(o.crashLooping && Object.keys(o.crashLooping).length > 0
      ? { crashLooping: { ...o.crashLooping } }
      : {}),
    ...(o.superseded && o.superseded.length > 0 ? { superseded: [...o.superseded] } : {}),
    localParents: [...o.localParents],
    apiParents: [...o.apiParents],
    activeCheckpoints: [...o.activeCheckpoints],
    inactiveCheckpoints: [...o.inactiveCheckpoints],
    state: stateDocument(input.tracked),
  };
}
