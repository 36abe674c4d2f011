/** The agent's pure pieces: what each checkpoint must look like on disk, and its status record. */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { desiredActions, nextStatusRecord } from "../lib/agent.ts";
import type { PassResult, StateChange } from "../lib/core/pass.ts";
import type { CheckpointState } from "../lib/core/state.ts";
import { parseInstant } from "../lib/core/time.ts";

const T0 = parseInstant("2026-01-01T00:00:00Z")!;
const T1 = parseInstant("2026-01-01T00:05:00Z")!;
const DOWN = { apiAvailable: false, apiParent: false, localRunning: false, localParent: false };

function result(
  tracked: Record<string, CheckpointState>,
  lists: Partial<Pick<PassResult, "starts" | "stops" | "removes">> = {},
): PassResult {
  return {
    starts: [],
    stops: [],
    removes: [],
    ...lists,
    tracked: new Map(Object.entries(tracked)),
    changes: [],
    parents: new Map(),
    transitioned: true,
  };
}

Deno.test("desired actions follow the states, and a self stop cascade overrides them", () => {
  const tracked: Record<string, CheckpointState> = {
    "ns/self": { name: "inactive" },
    "ns/a": { name: "active" },
    "ns/n": { name: "none" },
  };
  assertEquals(
    Object.fromEntries(desiredActions(result(tracked))),
    { "ns/self": "stop", "ns/a": "start", "ns/n": "none" },
  );
  // The cascade reports ns/a stopped while its state stays active: it must be stopped on disk.
  assertEquals(
    Object.fromEntries(desiredActions(result(tracked, { stops: ["ns/a", "ns/self"] }))),
    { "ns/self": "stop", "ns/a": "stop", "ns/n": "none" },
  );
  // Removed checkpoints are no longer tracked but must still be removed.
  assertEquals(desiredActions(result({}, { removes: ["ns/gone"] })).get("ns/gone"), "remove");
});

function change(from: CheckpointState, to: CheckpointState): StateChange {
  return { id: "ns/a", from, to, conditions: DOWN };
}

Deno.test("status records: timestamps of activation and deactivation, reasons, deadlines", () => {
  const inactive: CheckpointState = { name: "inactive" };
  const active: CheckpointState = { name: "active" };
  const created = nextStatusRecord(
    undefined,
    "ns/a",
    inactive,
    change({ name: "none" }, inactive),
    T0,
  );
  assertEquals(created, {
    id: "ns/a",
    state: "inactive",
    createdAt: "2026-01-01T00:00:00Z",
    reason: "ParentKnown",
    message: "the kubelet knows the parent",
  });
  const activated = nextStatusRecord(created, "ns/a", active, change(inactive, active), T1);
  assertEquals(activated, {
    ...created,
    state: "active",
    reason: "ControlPlaneUnavailable",
    message: "the API server cannot vouch for the parent and it does not run on this node",
    lastActivatedAt: "2026-01-01T00:05:00Z",
  });
  const grace: CheckpointState = { name: "active-grace", graceEnd: T1 };
  const inGrace = nextStatusRecord(activated, "ns/a", grace, change(active, grace), T1);
  // Still started: the activation time stays, and the deadline is recorded.
  assertEquals(inGrace.lastActivatedAt, "2026-01-01T00:05:00Z");
  assertEquals(inGrace.graceEnd, "2026-01-01T00:05:00Z");
  assertEquals(inGrace.reason, "ParentDeleted");
  const stopped = nextStatusRecord(
    inGrace,
    "ns/a",
    inactive,
    { ...change(grace, inactive), conditions: { ...DOWN, localRunning: true } },
    T1,
  );
  assertEquals([stopped.lastDeactivatedAt, stopped.graceEnd, stopped.reason], [
    "2026-01-01T00:05:00Z",
    undefined,
    "ParentRunning",
  ]);
  // Tracked from disk with no change (runtime unknown): the record is created as it stands.
  assertEquals(nextStatusRecord(undefined, "ns/b", active, undefined, T0), {
    id: "ns/b",
    state: "active",
    createdAt: "2026-01-01T00:00:00Z",
    reason: "Discovered",
    message: "found on this node",
    lastActivatedAt: "2026-01-01T00:00:00Z",
  });
});
