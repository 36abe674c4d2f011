/**
 * A parent that carries what a kubelet refuses in a static pod: pull secrets (a kubelet from 1.34
 * refuses a static pod that names any secret) and an ephemeral container left by `kubectl debug`
 * (never allowed in a pod being created). Its checkpoint must still run during an outage on the
 * simulated kubelet, which reads and validates static pods with its own parser, as a 1.34 one.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { podId } from "../../lib/core/pod.ts";
import { controlPlane } from "../../lib/sim/control_plane.ts";
import { withAgentOnNode } from "../helpers/agent_on_node.ts";

const SCHEDULER = "kube-system/kube-scheduler-q8w2c";

function clusterWithDebuggedScheduler() {
  const cluster = controlPlane("cp-1");
  const pod = cluster.pods.find((p) => podId(p) === SCHEDULER)!;
  const spec = pod.spec as Record<string, unknown>;
  spec.imagePullSecrets = [{ name: "registry-credentials" }];
  spec.ephemeralContainers = [{
    name: "debugger-x7k2q",
    image: "busybox:1.36",
    targetContainerName: "kube-scheduler",
  }];
  return cluster;
}

Deno.test("a parent with pull secrets and an ephemeral container: its copy runs during an outage", async () => {
  await withAgentOnNode({ cluster: clusterWithDebuggedScheduler() }, {}, async (n) => {
    await n.pass();
    await n.node.loseControlPlane();
    const down = await n.pass();
    assert(down.plan.starts.includes(SCHEDULER), JSON.stringify(down.plan));
    await n.node.advance(2_000);
    assertEquals(n.node.kubeletLog, []);
    const copy = `${SCHEDULER}-cp-1`;
    const events = n.node.events.filter((e) => e.pod === copy).map((e) => e.event);
    assert(events.includes("container-running"), events.join(", "));
  });
});
