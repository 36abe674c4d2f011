/**
 * One planning pass: merging, reporting, self cascades (docs/design.md#planning) and identity rules
 * (docs/design.md#identity).
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { type Observations, type PassInput, runPass } from "../../lib/core/pass.ts";
import type { CheckpointState } from "../../lib/core/state.ts";
import { NANOS_PER_SECOND } from "../../lib/core/time.ts";
import { checkpoint, parent, pod, staticPod } from "../helpers/pods.ts";
import { type Pod, podId } from "../../lib/core/pod.ts";

const NOW = 1_800_000_000n * NANOS_PER_SECOND;
const G = 60n * NANOS_PER_SECOND;
const SELF = { nodeName: "n1", podName: "pod-checkpointer-n1", podNamespace: "kube-system" };
const SELF_ID = "kube-system/pod-checkpointer";

function observe(partial: Partial<Observations>): Observations {
  return {
    apiAvailable: true,
    runtimeAvailable: true,
    kubeletAvailable: true,
    localRunning: [],
    localParents: [],
    apiParents: [],
    activeCheckpoints: [],
    inactiveCheckpoints: [],
    ...partial,
  };
}

/** The whole result of a pass. */
function run(
  obs: Partial<Observations>,
  tracked: Record<string, CheckpointState> = {},
  extra: Partial<PassInput> = {},
) {
  return runPass({
    now: NOW,
    gracePeriod: G,
    observations: observe(obs),
    tracked: new Map(Object.entries(tracked)),
    ...extra,
  });
}

/** What a plan document says of a pass. */
function pass(
  obs: Partial<Observations>,
  tracked: Record<string, CheckpointState> = {},
  extra: Partial<PassInput> = {},
) {
  const r = run(obs, tracked, extra);
  return {
    starts: r.starts,
    stops: r.stops,
    removes: r.removes,
    state: Object.fromEntries(r.tracked),
  };
}

const ACTIVE: CheckpointState = { name: "active" };
const INACTIVE: CheckpointState = { name: "inactive" };
const NONE: CheckpointState = { name: "none" };
const SELF_CP: CheckpointState = { name: "self-checkpoint" };

Deno.test("a running parent is tracked and reported stopped on its first pass", () => {
  const p = parent("kube-system/kube-apiserver");
  assertEquals(pass({ localRunning: [p], localParents: [p], apiParents: [p] }), {
    starts: [],
    stops: ["kube-system/kube-apiserver"],
    removes: [],
    state: { "kube-system/kube-apiserver": INACTIVE },
  });
});

Deno.test("a parent only the API server knows, not running, stays none", () => {
  const p = parent("kube-system/scheduler");
  assertEquals(pass({ apiParents: [p] }).state, { "kube-system/scheduler": NONE });
});

Deno.test("on-disk checkpoints are tracked: active wins over inactive", () => {
  const got = pass(
    {
      apiAvailable: false,
      localRunning: [pod("kube-system/a"), pod("kube-system/b")],
      activeCheckpoints: [checkpoint("kube-system/a")],
      inactiveCheckpoints: [checkpoint("kube-system/a"), checkpoint("kube-system/b")],
    },
  );
  // Both run, API down: active → inactive (stop reported), inactive stays (nothing reported).
  assertEquals(got, {
    starts: [],
    stops: ["kube-system/a"],
    removes: [],
    state: { "kube-system/a": INACTIVE, "kube-system/b": INACTIVE },
  });
});

Deno.test("filters: static pods, checkpoints and unannotated pods are not parents", () => {
  const notParents = [
    staticPod("kube-system/etcd-n1"),
    checkpoint("kube-system/copy"),
    pod("kube-system/plain"),
  ];
  const got = pass({ localRunning: notParents, localParents: notParents, apiParents: notParents });
  assertEquals(got.state, {});
});

Deno.test("filters: only pods with checkpoint-of count in the manifest dirs", () => {
  const got = pass({
    apiAvailable: false,
    activeCheckpoints: [pod("kube-system/foreign"), parent("kube-system/parent-manifest")],
    inactiveCheckpoints: [pod("kube-system/other")],
  });
  assertEquals(got.state, {});
});

Deno.test("checkpoint-of with an empty value still marks a checkpoint", () => {
  const cp = pod("kube-system/x", { "checkpointer.alpha.coreos.com/checkpoint-of": "" });
  assertEquals(pass({ apiAvailable: false, inactiveCheckpoints: [cp] }).starts, ["kube-system/x"]);
});

Deno.test("only a change of action is reported", () => {
  // inactive → inactive-grace: both stop, nothing reported.
  const got = pass({ localRunning: [pod("ns/a")] }, { "ns/a": INACTIVE });
  assertEquals(got.stops, []);
  assertEquals(got.state, { "ns/a": { name: "inactive-grace", graceEnd: NOW + G } });
  // active → active-grace: both start, nothing reported.
  const got2 = pass({}, { "ns/a": ACTIVE });
  assertEquals(got2.starts, []);
  assertEquals(got2.state, { "ns/a": { name: "active-grace", graceEnd: NOW + G } });
});

Deno.test("an expired grace period removes and forgets the checkpoint", () => {
  const got = pass({}, { "ns/a": { name: "inactive-grace", graceEnd: NOW } });
  assertEquals(got, { starts: [], stops: [], removes: ["ns/a"], state: {} });
});

Deno.test("with a zero grace period a deleted parent's checkpoint goes in one pass", () => {
  const got = pass({ localRunning: [pod("ns/a")] }, { "ns/a": INACTIVE }, { gracePeriod: 0n });
  assertEquals(got.removes, ["ns/a"]);
  // A parent seen for the first time whose API object is gone: none → remove, reported.
  const p = parent("ns/b");
  const got2 = pass({ localRunning: [p], localParents: [p] }, {}, { gracePeriod: 0n });
  assertEquals(got2.removes, ["ns/b"]);
  assertEquals(got2.state, {});
});

Deno.test("reported lists are sorted by id", () => {
  const ids = ["ns/c", "ns/a", "kube-system/z", "ns/b"];
  const got = pass(
    { apiAvailable: false },
    Object.fromEntries(ids.map((id) => [id, INACTIVE])),
  );
  assertEquals(got.starts, ["kube-system/z", "ns/a", "ns/b", "ns/c"]);
});

Deno.test("kubelet unavailable: its parents are ignored", () => {
  const p = parent("ns/a");
  const got = pass({ apiAvailable: false, kubeletAvailable: false, localParents: [p] });
  assertEquals(got.state, {});
  // With the kubelet answering, the same pod (L, not running, API down) becomes active.
  assertEquals(pass({ apiAvailable: false, localParents: [p] }).starts, ["ns/a"]);
});

Deno.test("API unavailable: its parents are ignored", () => {
  const p = parent("ns/a");
  const got = pass({ apiAvailable: false, apiParents: [p], localRunning: [p] });
  assertEquals(got.state, {});
});

Deno.test("runtime unavailable: merge only, every state holds, nothing reported", () => {
  const tracked: Record<string, CheckpointState> = {
    "ns/a": INACTIVE,
    "ns/g": { name: "active-grace", graceEnd: NOW - G },
  };
  const got = pass(
    {
      runtimeAvailable: false,
      apiAvailable: false,
      inactiveCheckpoints: [checkpoint("ns/disk")],
      localParents: [parent("ns/new")],
    },
    tracked,
  );
  assertEquals(got, {
    starts: [],
    stops: [],
    removes: [],
    state: { ...tracked, "ns/disk": INACTIVE, "ns/new": NONE },
  });
});

Deno.test("a source failed for the agent's own reason: merge only, every state holds, even with the API server not asked", () => {
  const tracked: Record<string, CheckpointState> = {
    "ns/a": INACTIVE,
    "ns/g": { name: "active-grace", graceEnd: NOW - G },
  };
  // The API server not asked and nothing running: as an outage, ns/a would be activated.
  assertEquals(pass({ apiAvailable: false }, tracked).starts, ["ns/a"]);
  const got = pass({ apiAvailable: false, ownFailure: true }, tracked);
  assertEquals(got, { starts: [], stops: [], removes: [], state: tracked });
});

Deno.test("runtime unavailable: a tracked self in state none still becomes self-checkpoint", () => {
  const got = pass({ runtimeAvailable: false }, { [SELF_ID]: NONE }, { self: SELF });
  assertEquals(got.state, { [SELF_ID]: SELF_CP });
});

Deno.test("self identity: the -<nodeName> suffix is removed once, only when present", () => {
  const cases: [typeof SELF, string, boolean][] = [
    [SELF, "kube-system/pod-checkpointer", true],
    [{ ...SELF, podName: "pod-checkpointer" }, "kube-system/pod-checkpointer", true],
    [{ ...SELF, podName: "pod-checkpointer-n1-n1" }, "kube-system/pod-checkpointer-n1", true],
    [{ ...SELF, podName: "pod-checkpointer-n1-n1" }, "kube-system/pod-checkpointer", false],
    [{ ...SELF, podName: "pod-checkpointer-n2" }, "kube-system/pod-checkpointer", false],
    [{ ...SELF, podNamespace: "other" }, "kube-system/pod-checkpointer", false],
  ];
  for (const [self, id, isSelf] of cases) {
    const got = pass({ apiAvailable: false, inactiveCheckpoints: [checkpoint(id)] }, {}, { self });
    // Self found on disk is self-checkpoint (start every pass); anything else inactive → active.
    assertEquals(got.state[id], isSelf ? SELF_CP : ACTIVE, `${self.podName} vs ${id}`);
  }
});

Deno.test("self is recognised by id with no pod at hand", () => {
  const got = pass({}, { [SELF_ID]: SELF_CP, "ns/a": ACTIVE }, { self: SELF });
  // API up, no parent: self enters active-grace (still start, reported every pass).
  assertEquals(got.starts, [SELF_ID]);
  assertEquals(got.state[SELF_ID], { name: "active-grace", graceEnd: NOW + G });
});

Deno.test("self's start is reported on every pass, in id order with the others", () => {
  const self = parent(SELF_ID);
  const first = pass(
    { apiAvailable: false, localParents: [self] },
    { "a/x": INACTIVE, "z/y": INACTIVE },
    { self: SELF },
  );
  assertEquals(first.starts, ["a/x", SELF_ID, "z/y"]);
  assertEquals(first.state[SELF_ID], SELF_CP);
  const second = pass({ apiAvailable: false }, first.state, { self: SELF });
  assertEquals(second.starts, [SELF_ID]);
});

Deno.test("self stop cascade: every other non-none checkpoint stops, self last, states kept", () => {
  const tracked: Record<string, CheckpointState> = {
    [SELF_ID]: { name: "active-grace", graceEnd: NOW + G },
    "ns/b": ACTIVE,
    "ns/a": { name: "inactive-grace", graceEnd: NOW + G },
    "zz/none": NONE,
  };
  const selfParent = parent(SELF_ID);
  // API up, parent back and running: active-grace → inactive (stop).
  const got = pass(
    { apiParents: [selfParent], localRunning: [selfParent, pod("ns/b")] },
    tracked,
    { self: SELF },
  );
  assertEquals(got.stops, ["ns/a", "ns/b", SELF_ID]);
  assertEquals(got.starts, []);
  assertEquals(got.state, { ...tracked, [SELF_ID]: INACTIVE });
  // The cascade repeats while self's action stays stop.
  const again = pass(
    { apiParents: [selfParent], localRunning: [selfParent, pod("ns/b")] },
    got.state,
    { self: SELF },
  );
  assertEquals(again.stops, ["ns/a", "ns/b", SELF_ID]);
  assertEquals(again.state, got.state);
});

Deno.test("self remove cascade: others removed and forgotten, none kept, self last", () => {
  const tracked: Record<string, CheckpointState> = {
    [SELF_ID]: { name: "active-grace", graceEnd: NOW },
    "ns/b": ACTIVE,
    "ns/a": INACTIVE,
    "ns/quiet": NONE,
  };
  // API up, self's parent gone, its deadline reached: remove.
  const got = pass({}, tracked, { self: SELF });
  assertEquals(got, {
    starts: [],
    stops: [],
    removes: ["ns/a", "ns/b", SELF_ID],
    state: { "ns/quiet": NONE },
  });
});

Deno.test("a self parent discovered as none becomes self-checkpoint at once", () => {
  const self = parent(SELF_ID);
  const got = pass({ apiParents: [self] }, {}, { self: SELF });
  assertEquals(got.state, { [SELF_ID]: SELF_CP });
  assertEquals(got.starts, [SELF_ID]);
});

Deno.test("a tracked inactive self is not reset to self-checkpoint", () => {
  const self = parent(SELF_ID);
  const got = pass({ apiParents: [self], localRunning: [self] }, { [SELF_ID]: INACTIVE }, {
    self: SELF,
  });
  assertEquals(got.state[SELF_ID], INACTIVE);
  assertEquals(got.stops, [SELF_ID]);
});

Deno.test("without a self identity no pod is self", () => {
  const got = pass({ apiAvailable: false, inactiveCheckpoints: [checkpoint(SELF_ID)] });
  assertEquals(got.state[SELF_ID], ACTIVE);
});

Deno.test("later duplicates of one id replace earlier ones", () => {
  const running: Pod[] = [pod("ns/a"), pod("ns/a")];
  assertEquals(pass({ apiAvailable: false, localRunning: running }, { "ns/a": ACTIVE }).stops, [
    "ns/a",
  ]);
});

// Who can make a parent (docs/design.md#trust): the namespaces in scope, and a kubelet read
// unverified that confirms and never adds.

const SCOPE: Partial<PassInput> = { namespaces: ["kube-system"] };

Deno.test("namespaces: parents outside them are no parents, from the API server or the kubelet", () => {
  const tenant = parent("tenant/escalate");
  const own = parent("kube-system/kube-apiserver");
  for (const apiAvailable of [true, false]) {
    const r = run(
      { apiAvailable, apiParents: [tenant, own], localParents: [tenant, own] },
      {},
      SCOPE,
    );
    assertEquals([...r.parents.keys()], ["kube-system/kube-apiserver"]);
    assertEquals(Object.fromEntries(r.tracked), { "kube-system/kube-apiserver": ACTIVE });
  }
  // Unset, or "*": every namespace, as the plan contract always read a snapshot.
  for (const namespaces of [undefined, ["*"]]) {
    const got = pass({ apiParents: [tenant], localParents: [tenant] }, {}, { namespaces });
    assertEquals(got.starts, ["tenant/escalate"], String(namespaces));
  }
});

Deno.test("namespaces: a checkpoint outside them is removed whatever is observed, said as such", () => {
  const tracked: Record<string, CheckpointState> = {
    "tenant/a": ACTIVE,
    "tenant/b": { name: "inactive-grace", graceEnd: NOW + G },
  };
  for (const runtimeAvailable of [true, false]) {
    const r = run(
      {
        runtimeAvailable,
        apiAvailable: false,
        apiParents: [parent("tenant/c")],
        localParents: [parent("tenant/c")],
        activeCheckpoints: [checkpoint("tenant/c"), checkpoint("kube-system/z")],
        inactiveCheckpoints: [checkpoint("tenant/d"), checkpoint("kube-system/z")],
      },
      tracked,
      SCOPE,
    );
    assertEquals(r.removes, ["tenant/a", "tenant/b", "tenant/c", "tenant/d"]);
    assertEquals(r.starts, []);
    assertEquals(Object.fromEntries(r.tracked), { "kube-system/z": ACTIVE });
    assertEquals(
      r.changes.filter((c) => c.cause === "outside-namespaces").map((c) => [c.id, c.from.name]),
      [["tenant/a", "active"], ["tenant/b", "inactive-grace"], ["tenant/c", "active"], [
        "tenant/d",
        "inactive",
      ]],
    );
  }
});

Deno.test("namespaces: removals outside them sort with the others; a self cascade keeps self last", () => {
  const got = pass(
    { apiAvailable: true },
    {
      "a/x": ACTIVE,
      "kube-system/old": { name: "inactive-grace", graceEnd: NOW },
      "z/y": INACTIVE,
    },
    SCOPE,
  );
  assertEquals(got.removes, ["a/x", "kube-system/old", "z/y"]);
  const cascade = pass(
    {},
    {
      [SELF_ID]: { name: "active-grace", graceEnd: NOW },
      "kube-system/b": ACTIVE,
      "tenant/a": INACTIVE,
    },
    { ...SCOPE, self: SELF },
  );
  assertEquals(cascade.removes, ["kube-system/b", "tenant/a", SELF_ID]);
});

Deno.test("namespaces: self is the agent's own, in scope wherever it runs", () => {
  const self = { ...SELF, podNamespace: "checkpointer" };
  const id = "checkpointer/pod-checkpointer";
  const got = pass({ apiParents: [parent(id)] }, {}, { ...SCOPE, self });
  assertEquals(got.state, { [id]: SELF_CP });
  const onDisk = pass({ apiAvailable: false, activeCheckpoints: [checkpoint(id)] }, {}, {
    ...SCOPE,
    self,
  });
  assertEquals([onDisk.removes, onDisk.state], [[], { [id]: SELF_CP }]);
});

Deno.test("a kubelet read unverified adds no parent and no pod: it confirms what is known", () => {
  const known = parent("kube-system/known");
  const listedByApi = parent("kube-system/api");
  const stranger = parent("kube-system/stranger");
  const obs = (apiAvailable: boolean, kubeletVerified?: boolean): Partial<Observations> => ({
    apiAvailable,
    kubeletVerified,
    apiParents: [listedByApi],
    localParents: [known, listedByApi, stranger],
  });
  const tracked = { [podId(known)]: NONE };

  // API down: the stranger is nobody, and the known parent's pod is not what a checkpoint
  // would be written from; L still moves the known one on from none.
  const down = run(obs(false, false), tracked);
  assertEquals([...down.parents.keys()], []);
  assertEquals(Object.fromEntries(down.tracked), { "kube-system/known": ACTIVE });
  // API up: the API server's parent, with the API server's pod; L confirms it (the known one,
  // gone from the API server, starts its grace period).
  const up = run(obs(true, false), tracked);
  assertEquals([...up.parents.keys()], ["kube-system/api"]);
  assertEquals(up.parents.get("kube-system/api"), listedByApi);
  assertEquals(Object.fromEntries(up.tracked), {
    "kube-system/api": ACTIVE,
    "kube-system/known": { name: "inactive-grace", graceEnd: NOW + G },
  });
  // Verified (or unset, as every recorded snapshot): the kubelet introduces parents as before.
  for (const kubeletVerified of [true, undefined]) {
    const verified = run(obs(false, kubeletVerified), tracked);
    assertEquals([...verified.parents.keys()].sort(), [
      "kube-system/api",
      "kube-system/known",
      "kube-system/stranger",
    ]);
    assertEquals(verified.starts.length, 3);
  }
});

Deno.test("crash-looping: a parent whose containers exist does not count as running; its copy comes and stays", () => {
  const p = parent("kube-system/kube-apiserver");
  const id = podId(p);
  const crashLooping = { [id]: 2 };
  // The API server gone: the copy of the kept version is activated, and says why.
  const down = run({ apiAvailable: false, localRunning: [p], localParents: [p], crashLooping }, {
    [id]: INACTIVE,
  });
  assertEquals([down.starts, down.tracked.get(id)], [[id], ACTIVE]);
  assertEquals(down.changes.map((c) => c.crashLoopingKept), [2]);
  // The copy serves the API: the parent is listed, and still crash-loops: the copy stays.
  const up = run({ localRunning: [p], localParents: [p], apiParents: [p], crashLooping }, {
    [id]: ACTIVE,
  });
  assertEquals([up.stops, up.tracked.get(id), up.changes], [[], ACTIVE, []]);
  // Not crash-looping any more (Ready, or promoted): it runs, and the copy goes.
  const back = run({ localRunning: [p], localParents: [p], apiParents: [p] }, { [id]: ACTIVE });
  assertEquals([back.stops, back.tracked.get(id)], [[id], INACTIVE]);
});

Deno.test("superseded: a checkpoint whose successor took its kept version is removed once its parent is gone", () => {
  const old = "kube-system/kube-apiserver-old";
  const successor = parent("kube-system/kube-apiserver-new");
  const tracked = { [old]: ACTIVE, [podId(successor)]: INACTIVE };
  const obs = {
    localRunning: [successor],
    localParents: [successor],
    apiParents: [successor],
    superseded: [old],
  };
  const r = run(obs, tracked);
  assertEquals([r.removes, r.tracked.has(old)], [[old], false]);
  assertEquals(r.changes.map((c) => [c.id, c.cause]), [[old, "superseded"]]);
  // While its own parent is still listed (a surge), it is no one's to remove.
  const both = run({ ...obs, apiParents: [successor, parent(old)] }, tracked);
  assertEquals(both.removes, []);
});
