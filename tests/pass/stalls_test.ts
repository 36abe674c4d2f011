/**
 * Stalled starts (lib/pass/stalls.ts): the judgement by table, and the real agent on a simulated
 * node whose kubelet reads another static-pod directory than the agent writes, so that no
 * activated copy ever runs.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { formatInstant, NANOS_PER_MILLI } from "../../lib/core/time.ts";
import { imagesOf, stalledStarts, type StallInput } from "../../lib/pass/stalls.ts";
import type { StatusRecord } from "../../lib/store/status_record.ts";
import { START } from "../admin/harness.ts";
import { withAgentOnNode } from "../helpers/agent_on_node.ts";

const MINUTE = 60_000;

function at(ms: number): string {
  return formatInstant(START + BigInt(ms) * NANOS_PER_MILLI);
}

function record(id: string, activatedMsAgo?: number): StatusRecord {
  return {
    id,
    state: "active",
    createdAt: at(-10 * MINUTE),
    ...(activatedMsAgo !== undefined ? { lastActivatedAt: at(-activatedMsAgo) } : {}),
    reason: "ParentNotRunning",
    message: "",
  };
}

function judge(input: Partial<StallInput>) {
  return stalledStarts({
    records: [],
    started: new Set(),
    running: [],
    nodeName: "cp-1",
    now: START,
    startTimeoutMs: 2 * MINUTE,
    ...input,
  });
}

Deno.test("a started checkpoint is stalled from startTimeout after its activation while its copy does not run", () => {
  const records = [
    record("kube-system/late", 2 * MINUTE),
    record("kube-system/early", 2 * MINUTE - 1),
    record("kube-system/runs", 5 * MINUTE),
    record("kube-system/stopped", 5 * MINUTE),
    record("kube-system/never-activated"),
  ];
  const started = new Set([
    "kube-system/late",
    "kube-system/early",
    "kube-system/runs",
    "kube-system/never-activated",
  ]);
  const running = [{
    namespace: "kube-system",
    name: "runs-cp-1",
    uid: "u",
    sandboxIds: [],
    restarts: 0,
    containerRunning: true,
  }];
  assertEquals(judge({ records, started, running }), [{
    id: "kube-system/late",
    activeSince: at(-2 * MINUTE),
    copy: "kube-system/late-cp-1",
  }]);
  // The parent running under its own name is not the copy.
  const parentOnly = [{
    namespace: "kube-system",
    name: "runs",
    uid: "u",
    sandboxIds: [],
    restarts: 0,
    containerRunning: true,
  }];
  assertEquals(judge({ records, started, running: parentOnly }).map((s) => s.id), [
    "kube-system/late",
    "kube-system/runs",
  ]);
  // The runtime did not answer: nothing is judged.
  assertEquals(judge({ records, started, running: undefined }), []);
});

Deno.test("the images named are the pod's, init containers first, each once", () => {
  const pod = {
    metadata: { namespace: "ns", name: "p" },
    spec: {
      initContainers: [{ name: "i", image: "init:1" }],
      containers: [{ name: "a", image: "app:1" }, { name: "b", image: "app:1" }, { name: "c" }],
    },
  };
  assertEquals(imagesOf(pod), ["init:1", "app:1"]);
  assertEquals(imagesOf(undefined), []);
});

Deno.test("a kubelet that reads another directory: every activated copy is a stalled start, said once", async () => {
  await withAgentOnNode({}, {}, async (n) => {
    // The kubelet reads etc/kubernetes/manifests; this agent writes next to it.
    const staticPodDir = join(n.node.root, "etc/kubernetes/other-manifests");
    await n.restart({ staticPodDir });
    const errors = () =>
      n.log.lines.filter((l) => l.level === "error" && l.msg.startsWith("stalled start:"));
    await n.pass();
    await n.node.loseControlPlane();
    const down = await n.pass();
    const activated = [...down.plan.starts].sort();
    assert(activated.length > 0, JSON.stringify(down.plan));
    assertEquals(down.stalledStarts, []);

    n.clock.advance(2 * MINUTE - 1);
    assertEquals((await n.pass()).stalledStarts, [], "not before startTimeout");
    n.clock.advance(1);
    const stalled = await n.pass();
    assertEquals(stalled.stalledStarts.map((s) => s.id), activated);
    assertEquals(stalled.stalledStarts[0].copy, `${activated[0]}-cp-1`);
    assertEquals(errors().length, activated.length);
    const first = errors()[0];
    assertEquals(first.level, "error");
    assertEquals(first.checkpoint, activated[0]);
    const causes = (first.likelyCauses as string[]).join("\n");
    assert(causes.includes(staticPodDir) && causes.includes("ckpt-agent doctor"), causes);
    assert(causes.includes("registry.k8s.io/"), causes);
    assert(causes.includes(`${staticPodDir}/`), causes);

    // Said once per stall.
    await n.pass();
    assertEquals(errors().length, activated.length);

    // Without the runtime nothing is judged, and nothing is forgotten.
    await n.node.stopRuntime();
    assertEquals((await n.pass()).stalledStarts, []);
    await n.node.startRuntime();
    assertEquals((await n.pass()).stalledStarts.length, activated.length);
    assertEquals(errors().length, activated.length);
    assertEquals(
      n.log.find("stalled start over: the copy runs, or the checkpoint is no longer active"),
      [],
    );

    // The control plane returns: the checkpoints are withdrawn and the stalls end.
    await n.node.restoreControlPlane();
    await n.pass();
    await n.pass();
    const over = n.log.find(
      "stalled start over: the copy runs, or the checkpoint is no longer active",
    );
    assertEquals(over.map((l) => l.checkpoint).sort(), activated);
  });
});

Deno.test("a copy the kubelet runs is no stalled start", async () => {
  await withAgentOnNode({}, {}, async (n) => {
    await n.pass();
    await n.node.loseControlPlane();
    assert((await n.pass()).plan.starts.length > 0);
    await n.node.advance(2_000);
    n.clock.advance(10 * MINUTE);
    assertEquals((await n.pass()).stalledStarts, []);
    assertEquals(n.log.lines.filter((l) => l.msg.startsWith("stalled start")), []);
  });
});
