/** A checkpoint's status record after a pass (lib/pass/persist.ts), by table. */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { nextStatusRecord } from "../../lib/pass/persist.ts";
import type { StateChange } from "../../lib/core/pass.ts";
import type { CheckpointState } from "../../lib/core/state.ts";
import { parseInstant } from "../../lib/core/time.ts";

const T0 = parseInstant("2026-01-01T00:00:00Z")!;
const T1 = parseInstant("2026-01-01T00:05:00Z")!;
const DOWN = { apiAvailable: false, apiParent: false, localRunning: false, localParent: false };

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
