/**
 * The state machine against the table of docs/design.md#transitions, cell by cell: every state,
 * all 16 combinations of A, P, R and L, with deadlines before, at and after `now`.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import {
  actionOf,
  type CheckpointState,
  type Conditions,
  transition,
} from "../../lib/core/state.ts";
import { NANOS_PER_SECOND } from "../../lib/core/time.ts";

const NOW = 1_000_000n * NANOS_PER_SECOND;
const G = 60n * NANOS_PER_SECOND;
const TEN_SECONDS = 10n * NANOS_PER_SECOND;

type Column = "!A R" | "!A !R" | "A P R" | "A P !R" | "A !P";

/**
 * The table, transcribed. "stay" keeps the state; "stay, checked" keeps it unless the deadline
 * has passed; "IG(now+G)" and "AG(now+G)" enter a grace period, checked at once.
 */
const TABLE: Record<string, Record<Column, string>> = {
  "inactive": {
    "!A R": "inactive",
    "!A !R": "active",
    "A P R": "inactive",
    "A P !R": "active",
    "A !P": "IG(now+G), checked",
  },
  "inactive-grace": {
    "!A R": "stay, checked",
    "!A !R": "active",
    "A P R": "inactive",
    "A P !R": "active",
    "A !P": "stay, checked",
  },
  "active": {
    "!A R": "inactive",
    "!A !R": "active",
    "A P R": "inactive",
    "A P !R": "active",
    "A !P": "AG(now+G), checked",
  },
  "active-grace": {
    "!A R": "inactive",
    "!A !R": "stay, checked",
    "A P R": "inactive",
    "A P !R": "active",
    "A !P": "stay, checked",
  },
  "self-checkpoint": {
    "!A R": "stay",
    "!A !R": "stay",
    "A P R": "stay",
    "A P !R": "stay",
    "A !P": "AG(now+G), checked",
  },
};

function columnOf(c: Conditions): Column {
  if (!c.apiAvailable) return c.localRunning ? "!A R" : "!A !R";
  if (!c.apiParent) return "A !P";
  return c.localRunning ? "A P R" : "A P !R";
}

/** The expiry rules (docs/design.md#expiry). */
function expired(name: "inactive-grace" | "active-grace", column: Column): CheckpointState {
  if (name === "inactive-grace") return { name: "remove" };
  // An expired active grace period behaves as an inactive grace period ending now.
  return column === "!A !R" ? { name: "active" } : { name: "remove" };
}

function checked(
  name: "inactive-grace" | "active-grace",
  graceEnd: bigint,
  column: Column,
): CheckpointState {
  return NOW < graceEnd ? { name, graceEnd } : expired(name, column);
}

function expected(
  state: CheckpointState,
  c: Conditions,
  grace: bigint,
): CheckpointState {
  if (state.name === "none") {
    return c.localRunning || c.localParent ? expected({ name: "inactive" }, c, grace) : state;
  }
  const column = columnOf(c);
  const cell = TABLE[state.name][column];
  switch (cell) {
    case "stay":
      return state;
    case "stay, checked":
      if (state.name !== "inactive-grace" && state.name !== "active-grace") throw new Error(cell);
      return checked(state.name, state.graceEnd, column);
    case "IG(now+G), checked":
      return checked("inactive-grace", NOW + grace, column);
    case "AG(now+G), checked":
      return checked("active-grace", NOW + grace, column);
    default:
      return { name: cell } as CheckpointState;
  }
}

function allConditions(): Conditions[] {
  const out: Conditions[] = [];
  for (let bits = 0; bits < 16; bits++) {
    out.push({
      apiAvailable: (bits & 1) !== 0,
      apiParent: (bits & 2) !== 0,
      localRunning: (bits & 4) !== 0,
      localParent: (bits & 8) !== 0,
    });
  }
  return out;
}

const DEADLINES = { before: NOW + TEN_SECONDS, at: NOW, after: NOW - TEN_SECONDS };

function startStates(): [string, CheckpointState][] {
  const states: [string, CheckpointState][] = [
    ["none", { name: "none" }],
    ["inactive", { name: "inactive" }],
    ["active", { name: "active" }],
    ["self-checkpoint", { name: "self-checkpoint" }],
  ];
  for (const [when, graceEnd] of Object.entries(DEADLINES)) {
    states.push([`inactive-grace (deadline ${when} now)`, { name: "inactive-grace", graceEnd }]);
    states.push([`active-grace (deadline ${when} now)`, { name: "active-grace", graceEnd }]);
  }
  return states;
}

function describe(c: Conditions): string {
  return `A=${+c.apiAvailable} P=${+c.apiParent} R=${+c.localRunning} L=${+c.localParent}`;
}

Deno.test("every state × 16 conditions × deadline before/at/after follows the table", () => {
  let cells = 0;
  for (const [label, state] of startStates()) {
    for (const c of allConditions()) {
      // G = 60 s enters a grace period with a future deadline; G = 0 enters it already due.
      for (const grace of [G, 0n]) {
        const got = transition(state, NOW, c, grace);
        assertEquals(got, expected(state, c, grace), `${label}, ${describe(c)}, G=${grace}`);
        cells++;
      }
    }
  }
  assertEquals(cells, 10 * 16 * 2);
});

Deno.test("remove is terminal", () => {
  for (const c of allConditions()) {
    assertEquals(transition({ name: "remove" }, NOW, c, G), { name: "remove" });
  }
});

Deno.test("spot checks written out by hand", () => {
  const down: Conditions = {
    apiAvailable: false,
    apiParent: false,
    localRunning: false,
    localParent: false,
  };
  const deleted: Conditions = { ...down, apiAvailable: true };
  // Control plane lost, nothing running: an inactive checkpoint becomes active.
  assertEquals(transition({ name: "inactive" }, NOW, down, G), { name: "active" });
  // Parent deleted: the grace period starts at now + G.
  assertEquals(transition({ name: "active" }, NOW, deleted, G), {
    name: "active-grace",
    graceEnd: NOW + G,
  });
  // An expired active grace period with the API server down goes back to active.
  assertEquals(
    transition({ name: "active-grace", graceEnd: NOW }, NOW, down, G),
    { name: "active" },
  );
  // ... and with the parent confirmed deleted, is removed.
  assertEquals(
    transition({ name: "active-grace", graceEnd: NOW }, NOW, deleted, G),
    { name: "remove" },
  );
  // A pod nobody runs and the kubelet does not know stays untracked-in-effect.
  assertEquals(transition({ name: "none" }, NOW, down, G), { name: "none" });
  // A pod known only to the kubelet, during an outage: becomes active.
  assertEquals(
    transition({ name: "none" }, NOW, { ...down, localParent: true }, G),
    { name: "active" },
  );
});

Deno.test("actions of the states", () => {
  const table: [CheckpointState, string][] = [
    [{ name: "none" }, "none"],
    [{ name: "inactive" }, "stop"],
    [{ name: "inactive-grace", graceEnd: NOW }, "stop"],
    [{ name: "active" }, "start"],
    [{ name: "active-grace", graceEnd: NOW }, "start"],
    [{ name: "self-checkpoint" }, "start"],
    [{ name: "remove" }, "remove"],
  ];
  for (const [state, action] of table) assertEquals(actionOf(state), action, state.name);
});
