/**
 * One planning pass (docs/design.md#planning): merge what was observed into the tracked
 * checkpoints, move each through the state machine, and report what to start, stop and remove.
 * Pure: the caller supplies the clock reading and the observations.
 */
import { compareIds } from "./ids.ts";
import {
  checkpointIdOf,
  inNamespaces,
  isCheckpoint,
  isValidParent,
  type Pod,
  podId,
  podsById,
} from "./pod.ts";
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
  /**
   * The kubelet's answer was read with its serving certificate verified; unset: it was. An
   * answer read unverified (kubeletCaFile off, a certificate the CA did not sign, the read-only
   * port) adds no parent: its pods only confirm (L) checkpoints already tracked and parents the
   * API server lists, and no checkpoint is written from them (docs/design.md#trust).
   */
  kubeletVerified?: boolean;
  localRunning: readonly Pod[];
  /**
   * Parents crash-looping on an unproven spec, by id, with the version their checkpoint keeps
   * (lib/pass/crash_loops.ts): they do not count as running, however their containers show, so
   * the copy of the kept version takes over, and stays until they are Ready
   * (docs/design.md#crash-loops). Unset: none.
   */
  crashLooping?: Readonly<Record<string, number>>;
  /**
   * Checkpoints whose kept version a successor of the same controller inherited
   * (docs/design.md#lineage): removed, withdrawn first, once their own parent is gone, so that
   * their copy never stands in the successor's way. Unset: none.
   */
  superseded?: readonly string[];
  /**
   * A source failed for a reason of the agent's own (a permission it runs without): what it
   * would have said is unknown, and no outage. Every checkpoint holds its state, as when the
   * runtime cannot be asked (docs/design.md#own-failures). Unset: none did.
   */
  ownFailure?: boolean;
  localParents: readonly Pod[];
  apiParents: readonly Pod[];
  activeCheckpoints: readonly Pod[];
  inactiveCheckpoints: readonly Pod[];
}

export interface PassInput {
  now: Instant;
  gracePeriod: Duration;
  self?: SelfIdentity;
  /**
   * The namespaces parents may come from (the `namespace` setting); unset or `["*"]`: every
   * one. A checkpoint outside them is removed (docs/design.md#trust).
   */
  namespaces?: readonly string[];
  observations: Observations;
  /** What the previous pass left tracked, by id. Never contains `remove`. */
  tracked: ReadonlyMap<string, CheckpointState>;
}

export interface StateChange {
  id: string;
  from: CheckpointState;
  to: CheckpointState;
  conditions: Conditions;
  /**
   * Set when the change is not this checkpoint's transition: a consequence of the agent's own
   * checkpoint, its namespace outside `namespaces`, or a successor that took its kept version.
   */
  cause?: "self-removed" | "outside-namespaces" | "superseded";
  /** The kept version, when the parent did not count as running because it crash-loops. */
  crashLoopingKept?: number;
}

export interface PassResult {
  starts: string[];
  stops: string[];
  removes: string[];
  /** Every checkpoint still tracked after the pass; removed ones are absent. */
  tracked: Map<string, CheckpointState>;
  /**
   * Every state change of the pass: the checkpoints outside the namespaces by id, then self,
   * then the others by id.
   */
  changes: StateChange[];
  /** Valid parents seen this pass, by id: what the apply step checkpoints. */
  parents: Map<string, Pod>;
  /**
   * False when the runtime could not be asked, or a source failed for the agent's own reason:
   * the pass merged and held every state.
   */
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
  // Self is the agent's own pod, named by its own environment: in scope wherever it runs.
  const namespaceIn = inNamespaces(input.namespaces);
  const inScope = (id: string) => isSelf(id) || namespaceIn(id.slice(0, id.indexOf("/")));
  const isParent = (pod: Pod) => isValidParent(pod) && inScope(podId(pod));

  const listed = obs.kubeletAvailable
    ? podsById(obs.localParents, isParent)
    : new Map<string, Pod>();
  const apiParents = obs.apiAvailable ? podsById(obs.apiParents, isParent) : new Map();
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
  // A kubelet read unverified may be anyone on the node: its pods confirm what is known, and
  // are never what a checkpoint is made from.
  const verified = obs.kubeletVerified !== false;
  const localParents = verified
    ? listed
    : new Map([...listed].filter(([id]) => tracked.has(id) || apiParents.has(id)));
  const parents = new Map([...(verified ? localParents : []), ...apiParents]);
  for (const id of parents.keys()) if (!tracked.has(id)) tracked.set(id, NONE);
  if (selfId !== undefined && tracked.has(selfId) && actionOf(tracked.get(selfId)!) === "none") {
    tracked.set(selfId, SELF);
  }

  const crashLooping = new Map(Object.entries(obs.crashLooping ?? {}));
  const conditionsOf = (id: string): Conditions => ({
    apiAvailable: obs.apiAvailable,
    apiParent: apiParents.has(id),
    localRunning: running.has(id) && !crashLooping.has(id),
    localParent: localParents.has(id),
  });
  const result: PassResult = {
    starts: [],
    stops: [],
    removes: [],
    tracked,
    changes: [],
    parents,
    transitioned: obs.runtimeAvailable && !obs.ownFailure,
  };
  /** Removes `id` for a reason that is not its own transition, and says so. */
  const forget = (id: string, cause: NonNullable<StateChange["cause"]>) => {
    const from = tracked.get(id)!;
    result.changes.push({ id, from, to: { name: "remove" }, conditions: conditionsOf(id), cause });
    tracked.delete(id);
  };
  // A checkpoint outside the namespaces (left by an earlier version or configuration) is
  // removed whatever was observed: it is no parent's, and might be a tenant's.
  for (const id of sortedIds(tracked.keys())) {
    if (inScope(id)) continue;
    forget(id, "outside-namespaces");
    result.removes.push(id);
  }
  // A checkpoint a successor took the kept version of, its own parent gone: the successor's
  // checkpoint is the fallback now, and this one's copy would hold its ports.
  for (const id of sortedIds(obs.superseded ?? [])) {
    if (!tracked.has(id) || isSelf(id) || parents.has(id)) continue;
    forget(id, "superseded");
    result.removes.push(id);
  }
  // The runtime could not say what runs, or a source could not be asked for a reason of the
  // agent's own: every checkpoint holds its state (docs/design.md#runtime-unknown,
  // docs/design.md#own-failures).
  if (!result.transitioned) return result;

  const step = (id: string): CheckpointState => {
    const from = tracked.get(id)!;
    const conditions = conditionsOf(id);
    const to = transition(from, now, conditions, gracePeriod);
    const kept = crashLooping.get(id);
    if (!sameState(from, to)) {
      result.changes.push({
        id,
        from,
        to,
        conditions,
        ...(kept !== undefined ? { crashLoopingKept: kept } : {}),
      });
    }
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
      if (action === "stop") result.stops.push(...affected, selfId);
      else {
        for (const id of affected) forget(id, "self-removed");
        tracked.delete(selfId);
        // Those outside the namespaces may be among them: all by id, self last.
        result.removes = [...sortedIds([...result.removes, ...affected]), selfId];
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

  // Step 4: stops were collected in id order; starts may hold self at the front, removes those
  // outside the namespaces and those superseded.
  result.starts.sort(compareIds);
  result.removes.sort(compareIds);
  return result;
}
