/**
 * The reboot drill (tests/helpers/drill.ts): the real agent on a simulated node whose kubelet
 * admits, delays and restarts pods as a real one does, and whose API server is self-hosted. With
 * the port rule and the running rule, every parent comes back and only the parents run; without
 * either, the drill ends with the node stuck, as the real drill did.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { type DrillResult, runDrill } from "../helpers/drill.ts";

const APISERVER = "kube-system/kube-apiserver-7x2kq";
const CONTROLLER = "kube-system/kube-controller-manager-m4t9z";
const SCHEDULER = "kube-system/kube-scheduler-q8w2c";
const PARENTS = [APISERVER, CONTROLLER, SCHEDULER];
const COPIES = PARENTS.map((id) => `${id}-cp-1`);
const MANIFESTS = PARENTS.map((id) => `${id.replace("/", "-")}.json`);
/** Pods that are no checkpoint's business: the installer's static etcd, and a plain pod. */
const OTHERS = ["kube-system/coredns-5d8f7", "kube-system/etcd-cp-1"];
/** The kubelet's first restart back-off, and the second of its relist. */
const BACKOFF_S = 10 + 1;

function statesOf(result: DrillResult): string[] {
  return PARENTS.map((id) => result.states[id]);
}

Deno.test("the drill: the copies run through the outage and stay until each parent's container exists; then only the parents run", async () => {
  // The API server returns 0–4 s after one of the agent's passes (5 s apart): every phase.
  for (let offsetS = 0; offsetS < 5; offsetS++) {
    const result = await runDrill({ offsetS });
    const at = `offset ${offsetS} s: ${JSON.stringify(result.parents)}`;
    // The hole the old rule made: passes that saw the parents with a ready sandbox and no
    // container yet. Each kept every copy.
    const early = result.passes.filter((pass) => pass.sandboxOnly.length > 0);
    assert(early.length > 0, at);
    for (const pass of early) assertEquals(pass.active, PARENTS, at);
    // Every parent back within 90 s, every copy withdrawn, the inactive checkpoints kept.
    assertEquals(result.staticPodDir, ["etcd.yaml"], at);
    assertEquals(result.running, [...OTHERS, ...PARENTS].sort(), at);
    assertEquals(statesOf(result), ["inactive", "inactive", "inactive"], at);
    assertEquals(result.inactiveDir, MANIFESTS, at);
    assertEquals(Object.values(result.parentPhases), ["Running", "Running", "Running"], at);
    assert(result.apiServerAnswers, at);
    for (const parent of result.parents) {
      assert(parent.runningS !== undefined && parent.runningS <= 90, at);
      // Not before its container existed; and nothing ran for at most the back-off.
      assert(parent.copyStoppedS! >= parent.firstContainerS!, at);
      assert(parent.neitherS <= BACKOFF_S, at);
    }
    // The scheduler's copy never held its port (off the host network, and no host port
    // declared): its parent ran before its copy went.
    assertEquals(result.parents.find((p) => p.id === SCHEDULER)!.neitherS, 0, at);
  }
});

Deno.test("the drill without the port rule: copies declaring host ports get every parent rejected (NodePorts), for good", async () => {
  const result = await runDrill({ offsetS: 2, oldCopies: true, watchS: 300 });
  assertEquals(Object.values(result.parentPhases), [
    "Failed NodePorts",
    "Failed NodePorts",
    "Failed NodePorts",
  ]);
  // The copies were written again without ports once the parents were seen, but a rejected pod
  // is over for the kubelet: the parents never run, and the copies never go.
  assertEquals(result.running, [...OTHERS, ...COPIES].sort());
  assertEquals(statesOf(result), ["active", "active", "active"]);
  assertEquals(result.staticPodDir, ["etcd.yaml", ...MANIFESTS]);
});

Deno.test("the drill with a ready sandbox counted as running: copies withdrawn before the parents' containers exist", async () => {
  // The pass right at the API server's return: the copies go, the API server (a copy) with
  // them, before the kubelet has read the services. No parent can ever start, and the agent
  // believes they run: no control plane, for good.
  const stuck = await runDrill({ offsetS: 0, sandboxCounts: true, watchS: 300 });
  assertEquals(stuck.running, ["kube-system/etcd-cp-1"]);
  assertEquals(stuck.apiServerAnswers, false);
  assertEquals(statesOf(stuck), ["inactive", "inactive", "inactive"]);
  for (const parent of stuck.parents) assertEquals(parent.neitherS, Infinity);
  // A pass 3 s after it: the services were read, but nothing ran until the parents' containers
  // did, the scheduler's too.
  const hole = await runDrill({ offsetS: 2, sandboxCounts: true });
  for (const parent of hole.parents) {
    assert(parent.copyStoppedS! < parent.firstContainerS!, JSON.stringify(parent));
    assert(parent.neitherS >= 5, JSON.stringify(parent));
  }
});
