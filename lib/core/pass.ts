/**
 * One planning pass (docs/design.md#planning): merge what was observed into the tracked
 * checkpoints, move each through the state machine, and report what to start, stop and remove.
 * Pure: the caller supplies the clock reading and the observations.
 */
import { compareIds } from "./ids.ts";
import { checkpointIdOf, isCheckpoint, isValidParent, type Pod, podsById } from "./pod.ts";
import { type SelfIdentity, selfIdOf } from "./self.ts";
import {
  type Action,
  actionOf,
  type CheckpointState,
  type Conditions,
  sameState,
  transition,
} from "./state.ts";
import type { Duration, Instant } from "./time.ts";

/**
 * What one pass saw of the node. Failed observations are flagged, not faked
 * (docs/design.md#source-failures).
 */
export interface Observations {
  apiAvailable: boolean;
  runtimeAvailable: boolean;
  kubeletAvailable: boolean;
  localRunning: readonly Pod[];
  localParents: readonly Pod[];
  apiParents: readonly Pod[];
  activeCheckpoints: readonly Pod[];
  inactiveCheckpoints: readonly Pod[];
}

export interface PassInput {
  now: Instant;
  gracePeriod: Duration;
  self?: SelfIdentity;
  observations: Observations;
  /** What the previous pass left tracked, by id. Never contains `remove`. */
  tracked: ReadonlyMap<string, CheckpointState>;
}

export interface StateChange {
  id: string;
  from: CheckpointState;
  to: CheckpointState;
  conditions: Conditions;
  /** Set when the change is a consequence of the agent's own checkpoint, not of this one. */
  cascade?: "self-removed";
}

export interface PassResult {
  starts: string[];
  stops: string[];
  removes: string[];
  /** Every checkpoint still tracked after the pass; removed ones are absent. */
  tracked: Map<string, CheckpointState>;
  /** Every state change of the pass, self first, then by id. */
  changes: StateChange[];
  /** Valid parents seen this pass, by id: what the apply step checkpoints. */
  parents: Map<string, Pod>;
  /** False when the runtime could not be asked: the pass merged and held every state. */
  transitioned: boolean;
}

const NONE: CheckpointState = { name: "none" };
const INACTIVE: CheckpointState = { name: "inactive" };
const ACTIVE: CheckpointState = { name: "active" };
const SELF: CheckpointState = { name: "self-checkpoint" };

function sortedIds(ids: Iterable<string>): string[] {
  return [...ids].sort(compareIds);
}

export function runPass(input: PassInput): PassResult {
  const { now, gracePeriod, observations: obs } = input;
  const selfId = input.self ? selfIdOf(input.self) : undefined;
  const isSelf = (id: string) => id === selfId;

  const localParents = obs.kubeletAvailable
    ? podsById(obs.localParents, isValidParent)
    : new Map<string, Pod>();
  const apiParents = obs.apiAvailable ? podsById(obs.apiParents, isValidParent) : new Map();
  const running = podsById(obs.localRunning);
  const tracked = new Map(input.tracked);

  // Step 1: merge. On-disk checkpoints first (active wins over inactive), then parents.
  const diskStates: [Map<string, Pod>, CheckpointState][] = [
    [podsById(obs.activeCheckpoints, isCheckpoint, checkpointIdOf), ACTIVE],
    [podsById(obs.inactiveCheckpoints, isCheckpoint, checkpointIdOf), INACTIVE],
  ];
  for (const [pods, state] of diskStates) {
    for (const id of pods.keys()) {
      if (!tracked.has(id)) tracked.set(id, isSelf(id) ? SELF : state);
    }
  }
  const parents = new Map([...localParents, ...apiParents]);
  for (const id of parents.keys()) if (!tracked.has(id)) tracked.set(id, NONE);
  if (selfId !== undefined && tracked.has(selfId) && actionOf(tracked.get(selfId)!) === "none") {
    tracked.set(selfId, SELF);
  }

  const result: PassResult = {
    starts: [],
    stops: [],
    removes: [],
    tracked,
    changes: [],
    parents,
    transitioned: obs.runtimeAvailable,
  };
  // The runtime could not say what runs: every checkpoint holds its state
  // (docs/design.md#runtime-unknown).
  if (!obs.runtimeAvailable) return result;

  const conditionsOf = (id: string): Conditions => ({
    apiAvailable: obs.apiAvailable,
    apiParent: apiParents.has(id),
    localRunning: running.has(id),
    localParent: localParents.has(id),
  });
  const step = (id: string): CheckpointState => {
    const from = tracked.get(id)!;
    const conditions = conditionsOf(id);
    const to = transition(from, now, conditions, gracePeriod);
    if (!sameState(from, to)) result.changes.push({ id, from, to, conditions });
    return to;
  };
  const others = sortedIds([...tracked.keys()].filter((id) => !isSelf(id)));

  // Step 2: the agent's own checkpoint first; stopping or removing it cascades to all others.
  if (selfId !== undefined && tracked.has(selfId)) {
    const next = step(selfId);
    tracked.set(selfId, next);
    const action = actionOf(next);
    if (action === "start") result.starts.push(selfId);
    if (action === "stop" || action === "remove") {
      const affected = others.filter((id) => actionOf(tracked.get(id)!) !== "none");
      const list = action === "stop" ? result.stops : result.removes;
      list.push(...affected, selfId);
      if (action === "remove") {
        for (const id of affected) {
          result.changes.push({
            id,
            from: tracked.get(id)!,
            to: { name: "remove" },
            conditions: conditionsOf(id),
            cascade: "self-removed",
          });
          tracked.delete(id);
        }
        tracked.delete(selfId);
      }
      return result;
    }
  }

  // Step 3: everyone else. Only a change of action is reported.
  const reports: Record<Exclude<Action, "none">, string[]> = {
    start: result.starts,
    stop: result.stops,
    remove: result.removes,
  };
  for (const id of others) {
    const before = actionOf(tracked.get(id)!);
    const next = step(id);
    const after = actionOf(next);
    if (after === "remove") tracked.delete(id);
    else tracked.set(id, next);
    if (after !== before && after !== "none") reports[after].push(id);
  }

  // Step 4: stops and removes were collected in id order; starts may hold self at the front.
  result.starts.sort(compareIds);
  return result;
}
