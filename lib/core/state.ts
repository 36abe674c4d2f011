/**
 * The checkpoint state machine of docs/design.md#state-machine. Pure: time comes in as an argument.
 */
import type { Duration, Instant } from "./time.ts";

export const STATE_NAMES = [
  "none",
  "inactive",
  "inactive-grace",
  "active",
  "active-grace",
  "self-checkpoint",
  "remove",
] as const;
export type StateName = typeof STATE_NAMES[number];

export type GraceStateName = "inactive-grace" | "active-grace";

export type CheckpointState =
  | { name: Exclude<StateName, GraceStateName> }
  | { name: GraceStateName; graceEnd: Instant };

export type Action = "none" | "start" | "stop" | "remove";

/**
 * What the agent observed about one checkpoint this pass (A, P, R and L of
 * docs/design.md#state-machine).
 */
export interface Conditions {
  apiAvailable: boolean;
  apiParent: boolean;
  localRunning: boolean;
  localParent: boolean;
}

export function isGraceState(name: StateName): name is GraceStateName {
  return name === "inactive-grace" || name === "active-grace";
}

export function actionOf(state: CheckpointState): Action {
  switch (state.name) {
    case "none":
      return "none";
    case "inactive":
    case "inactive-grace":
      return "stop";
    case "active":
    case "active-grace":
    case "self-checkpoint":
      return "start";
    case "remove":
      return "remove";
  }
}

const INACTIVE: CheckpointState = { name: "inactive" };
const ACTIVE: CheckpointState = { name: "active" };
const REMOVE: CheckpointState = { name: "remove" };

function checkInactiveGrace(graceEnd: Instant, now: Instant): CheckpointState {
  return now < graceEnd ? { name: "inactive-grace", graceEnd } : REMOVE;
}

function checkActiveGrace(graceEnd: Instant, now: Instant, c: Conditions): CheckpointState {
  if (now < graceEnd) return { name: "active-grace", graceEnd };
  // Expired: become whatever an inactive grace period ending right now would become, so that
  // with the API server down and nothing running the copy stays up instead of being removed.
  return transition({ name: "inactive-grace", graceEnd: now }, now, c, 0n);
}

/** The next state of a checkpoint under the observed conditions. */
export function transition(
  state: CheckpointState,
  now: Instant,
  c: Conditions,
  gracePeriod: Duration,
): CheckpointState {
  const startGrace = now + gracePeriod;
  switch (state.name) {
    case "none":
      return c.localRunning || c.localParent ? transition(INACTIVE, now, c, gracePeriod) : state;
    case "self-checkpoint":
      // The agent's own copy stays up as long as the API server cannot say it was deleted.
      if (!c.apiAvailable || c.apiParent) return state;
      return checkActiveGrace(startGrace, now, c);
    case "inactive":
      if (!c.apiAvailable) return c.localRunning ? state : ACTIVE;
      if (!c.apiParent) return checkInactiveGrace(startGrace, now);
      return c.localRunning ? state : ACTIVE;
    case "inactive-grace":
      if (!c.apiAvailable) return c.localRunning ? checkInactiveGrace(state.graceEnd, now) : ACTIVE;
      if (!c.apiParent) return checkInactiveGrace(state.graceEnd, now);
      return c.localRunning ? INACTIVE : ACTIVE;
    case "active":
      if (!c.apiAvailable) return c.localRunning ? INACTIVE : state;
      if (!c.apiParent) return checkActiveGrace(startGrace, now, c);
      return c.localRunning ? INACTIVE : state;
    case "active-grace":
      if (!c.apiAvailable) {
        return c.localRunning ? INACTIVE : checkActiveGrace(state.graceEnd, now, c);
      }
      if (!c.apiParent) return checkActiveGrace(state.graceEnd, now, c);
      return c.localRunning ? INACTIVE : ACTIVE;
    case "remove":
      return state;
  }
}

export function sameState(a: CheckpointState, b: CheckpointState): boolean {
  return a.name === b.name && ("graceEnd" in a ? a.graceEnd : undefined) ===
      ("graceEnd" in b ? b.graceEnd : undefined);
}

/** What is wrong with a state as written in a document, if anything: a deadline exactly for grace. */
export function graceEndProblem(state: StateName, hasGraceEnd: boolean): string | undefined {
  if (isGraceState(state) && !hasGraceEnd) return `required for state ${state}`;
  if (!isGraceState(state) && hasGraceEnd) {
    return `only inactive-grace and active-grace have a deadline, not ${state}`;
  }
  return undefined;
}
