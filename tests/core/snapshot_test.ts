/**
 * The snapshot and plan documents in-process (lib/core/snapshot.ts): what `ckpt-agent plan`
 * reads and prints, without a subprocess, for the fast loop. tests/commands/plan_test.ts runs
 * the same bad documents through the command, with its exit codes.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { runPass } from "../../lib/core/pass.ts";
import {
  parseSnapshot,
  planDocument,
  snapshotDocument,
  SnapshotError,
} from "../../lib/core/snapshot.ts";
import { checkpoint, parent } from "../helpers/pods.ts";
import { BAD_SNAPSHOTS, snapshot } from "../helpers/snapshots.ts";

const plan = (doc: unknown) => planDocument(runPass(parseSnapshot(JSON.stringify(doc))));

for (const [label, input, field] of BAD_SNAPSHOTS) {
  Deno.test(`bad snapshot, ${label}: one line naming ${field}`, () => {
    let error: unknown;
    try {
      parseSnapshot(input);
    } catch (e) {
      error = e;
    }
    assert(error instanceof SnapshotError, `${label}: ${error}`);
    assertEquals(error.message.includes("\n"), false, error.message);
    assert(error.message.includes(field), `${error.message} should name ${field}`);
  });
}

Deno.test("a minimal snapshot gets the documented defaults", () => {
  assertEquals(snapshotDocument(parseSnapshot(JSON.stringify(snapshot()))), {
    ...snapshot(),
    gracePeriodSeconds: 60,
    runtimeAvailable: true,
    kubeletAvailable: true,
    kubeletVerified: true,
    state: {},
  });
});

Deno.test("a full snapshot reads back as the same document", () => {
  const apiserver = parent("kube-system/kube-apiserver");
  const doc = {
    now: "2026-01-01T00:00:00.5Z",
    gracePeriodSeconds: 0,
    self: { nodeName: "n1", podName: "pod-checkpointer-n1", podNamespace: "kube-system" },
    namespaces: ["kube-system", "kube-flannel"],
    apiAvailable: false,
    runtimeAvailable: false,
    kubeletAvailable: false,
    kubeletVerified: false,
    localRunning: [apiserver],
    crashLooping: { "kube-system/kube-apiserver": 2 },
    superseded: ["kube-system/kube-apiserver-old"],
    localParents: [apiserver],
    apiParents: [],
    activeCheckpoints: [checkpoint("kube-system/kube-apiserver")],
    inactiveCheckpoints: [checkpoint("kube-system/kube-apiserver")],
    state: {
      "a/x": { state: "active-grace", graceEnd: "2026-01-01T00:01:00Z" },
      "b/y": { state: "self-checkpoint" },
    },
  };
  assertEquals(snapshotDocument(parseSnapshot(JSON.stringify(doc))), doc);
});

Deno.test("a crash-looping parent in the snapshot is not running: its copy is started", () => {
  const apiserver = parent("kube-system/kube-apiserver");
  const doc = {
    ...snapshot(),
    apiAvailable: false,
    localRunning: [apiserver],
    localParents: [apiserver],
    state: { "kube-system/kube-apiserver": { state: "inactive" } },
  };
  assertEquals(plan(doc).starts, []);
  assertEquals(plan({ ...doc, crashLooping: { "kube-system/kube-apiserver": 1 } }).starts, [
    "kube-system/kube-apiserver",
  ]);
});

Deno.test("a plan's state fed back with a later now continues the sequence", () => {
  const gone = { ...snapshot(), gracePeriodSeconds: 10 };
  const one = plan({ ...gone, state: { "ns/a": { state: "active" } } });
  assertEquals(one, {
    starts: [],
    stops: [],
    removes: [],
    state: { "ns/a": { state: "active-grace", graceEnd: "2026-01-01T00:00:10Z" } },
  });
  const two = plan({ ...gone, now: "2026-01-01T00:00:09.999Z", state: one.state });
  assertEquals(two.state, one.state);
  const three = plan({ ...gone, now: "2026-01-01T00:00:10Z", state: two.state });
  assertEquals(three, { starts: [], stops: [], removes: ["ns/a"], state: {} });
});
