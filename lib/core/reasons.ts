/**
 * Why a checkpoint changed state, as a CamelCase reason and a sentence — what the status record
 * keeps and what the state-change log line says.
 */
import type { StateChange } from "./pass.ts";
import { formatInstant } from "./time.ts";

/** Why a copy is active while its parent's containers exist: the parent crash-loops. */
export const CRASH_LOOPING_REASON = "ParentCrashLooping";

export interface Explanation {
  reason: string;
  message: string;
}

export function explainChange(change: StateChange): Explanation {
  const { to, conditions: c } = change;
  if (change.cause === "self-removed") {
    return {
      reason: "AgentCheckpointRemoved",
      message: "the agent's own parent was deleted, so every checkpoint is removed",
    };
  }
  if (change.cause === "outside-namespaces") {
    return {
      reason: "OutsideNamespaces",
      message: "its namespace is not one the namespace setting lets parents come from: " +
        "withdrawn and removed",
    };
  }
  if (change.cause === "superseded") {
    return {
      reason: "Superseded",
      message: "a new pod of its parent's controller took its kept version, and its parent is " +
        "gone: withdrawn and removed",
    };
  }
  if (to.name === "active" && change.crashLoopingKept !== undefined) {
    return {
      reason: CRASH_LOOPING_REASON,
      message:
        `parent crash-looping on an unproven spec: kept version ${change.crashLoopingKept} ` +
        "active",
    };
  }
  switch (to.name) {
    case "remove":
      return {
        reason: "GracePeriodExpired",
        message: "the parent is gone from the API server and the grace period has ended",
      };
    case "inactive-grace":
    case "active-grace":
      return {
        reason: "ParentDeleted",
        message: `the parent is gone from the API server; the checkpoint is removed at ${
          formatInstant(to.graceEnd)
        } unless it returns`,
      };
    case "active":
      return c.apiAvailable
        ? { reason: "ParentNotRunning", message: "the parent exists but does not run on this node" }
        : {
          reason: "ControlPlaneUnavailable",
          message: "the API server cannot vouch for the parent and it does not run on this node",
        };
    case "inactive":
      return c.localRunning
        ? { reason: "ParentRunning", message: "the parent runs on this node" }
        : { reason: "ParentKnown", message: "the kubelet knows the parent" };
    case "self-checkpoint":
      return { reason: "AgentCheckpoint", message: "the agent's own checkpoint stays active" };
    case "none":
      return { reason: "Discovered", message: "a parent pod to checkpoint" };
  }
}
