/** What each tracked checkpoint must look like on disk after a pass (lib/pass/converge.ts). */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { desiredActions } from "../../lib/pass/converge.ts";
import type { PassResult } from "../../lib/core/pass.ts";
import type { CheckpointState } from "../../lib/core/state.ts";

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
