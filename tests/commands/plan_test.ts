/** `ckpt-agent plan` as a subprocess: the public snapshot → plan contract and its errors. */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { runCli } from "../helpers/cli.ts";
import { checkpoint, parent, pod } from "../helpers/pods.ts";
import { BAD_SNAPSHOTS, snapshot } from "../helpers/snapshots.ts";

async function plan(doc: unknown) {
  const r = await runCli(["plan", "--snapshot", "-"], { stdin: JSON.stringify(doc) });
  assertEquals(r.stderr, "");
  assertEquals(r.code, 0);
  return JSON.parse(r.stdout);
}

Deno.test("plan reads a snapshot file and prints the plan document", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const apiserver = parent("kube-system/kube-apiserver");
    const file = `${dir}/snap.json`;
    await Deno.writeTextFile(
      file,
      JSON.stringify(snapshot({
        apiAvailable: false,
        inactiveCheckpoints: [checkpoint("kube-system/kube-apiserver"), pod("kube-system/foreign")],
        localParents: [apiserver],
        state: { "ns/old": { state: "inactive-grace", graceEnd: "2026-01-01T00:00:30Z" } },
      })),
    );
    const r = await runCli(["plan", "--snapshot", file]);
    assertEquals(r.code, 0);
    assertEquals(r.stderr, "");
    // One line of JSON, keys in the documented order.
    assertEquals(
      r.stdout,
      '{"starts":["kube-system/kube-apiserver","ns/old"],"stops":[],"removes":[],' +
        '"state":{"kube-system/kube-apiserver":{"state":"active"},"ns/old":{"state":"active"}}}\n',
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("feeding the state back with a later now continues the sequence", async () => {
  const p = parent("kube-system/scheduler");
  // Pass 1: the parent runs and the API server knows it.
  const one = await plan(snapshot({ localRunning: [p], localParents: [p], apiParents: [p] }));
  assertEquals(one, {
    starts: [],
    stops: ["kube-system/scheduler"],
    removes: [],
    state: { "kube-system/scheduler": { state: "inactive" } },
  });
  // Pass 2: deleted from the API server, still running: grace period of 30 s starts.
  const two = await plan(snapshot({
    now: "2026-01-01T00:00:05.25Z",
    gracePeriodSeconds: 30,
    localRunning: [p],
    state: one.state,
  }));
  assertEquals(two, {
    starts: [],
    stops: [],
    removes: [],
    state: {
      "kube-system/scheduler": { state: "inactive-grace", graceEnd: "2026-01-01T00:00:35.25Z" },
    },
  });
  // Pass 3: one nanosecond before the deadline: still waiting.
  const three = await plan(snapshot({ now: "2026-01-01T00:00:35.249999999Z", state: two.state }));
  assertEquals(three.state, two.state);
  // Pass 4: at the deadline: removed and forgotten.
  const four = await plan(snapshot({ now: "2026-01-01T00:00:35.25Z", state: three.state }));
  assertEquals(four, { starts: [], stops: [], removes: ["kube-system/scheduler"], state: {} });
});

Deno.test("timestamps in the output are UTC whatever the input offset", async () => {
  const got = await plan(snapshot({
    now: "2026-01-01T02:00:00+02:00",
    state: { "ns/a": { state: "active" } },
  }));
  assertEquals(got.state["ns/a"], { state: "active-grace", graceEnd: "2026-01-01T00:01:00Z" });
});

Deno.test("a self cascade through the CLI puts self last", async () => {
  const got = await plan(snapshot({
    self: { nodeName: "n1", podName: "pod-checkpointer-n1", podNamespace: "kube-system" },
    state: {
      "kube-system/pod-checkpointer": { state: "active-grace", graceEnd: "2026-01-01T00:00:00Z" },
      "z/z": { state: "active" },
      "a/a": { state: "inactive" },
    },
  }));
  assertEquals(got, {
    starts: [],
    stops: [],
    removes: ["a/a", "z/z", "kube-system/pod-checkpointer"],
    state: {},
  });
});

Deno.test("namespaces and an unverified kubelet through the CLI: no tenant, no stranger", async () => {
  const known = checkpoint("kube-system/kube-apiserver");
  const got = await plan(snapshot({
    apiAvailable: false,
    namespaces: ["kube-system"],
    kubeletVerified: false,
    // During an outage, whoever answered at the kubelet's port lists a parent never seen.
    localParents: [parent("kube-system/stranger"), parent("tenant/escalate")],
    activeCheckpoints: [checkpoint("tenant/old")],
    inactiveCheckpoints: [known, checkpoint("tenant/old")],
  }));
  assertEquals(got, {
    starts: ["kube-system/kube-apiserver"],
    stops: [],
    removes: ["tenant/old"],
    state: { "kube-system/kube-apiserver": { state: "active" } },
  });
});

for (const [label, input, field] of BAD_SNAPSHOTS) {
  Deno.test(`bad snapshot, ${label}: exit 2, one line naming ${field}, nothing on stdout`, async () => {
    const r = await runCli(["plan", "--snapshot", "-"], { stdin: input });
    assertEquals(r.code, 2);
    assertEquals(r.stdout, "");
    const lines = r.stderr.trimEnd().split("\n");
    assertEquals(lines.length, 1, r.stderr);
    assertEquals(lines[0].includes(field), true, `${r.stderr} should name ${field}`);
  });
}

Deno.test("plan without --snapshot, or with an unreadable file: exit 2", async () => {
  for (
    const args of [["plan"], ["plan", "--snapshot", "/nonexistent/snap.json"], ["plan", "--bogus"]]
  ) {
    const r = await runCli(args);
    assertEquals(r.code, 2, args.join(" "));
    assertEquals(r.stdout, "");
    assertEquals(r.stderr.trimEnd().split("\n").length, 1, r.stderr);
  }
});
