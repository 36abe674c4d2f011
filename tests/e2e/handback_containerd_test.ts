/**
 * The running rule end to end on a real containerd: the real agent (its in-process daemon) with
 * the simulated API server and kubelet, and containerd as its runtime, sandboxes and containers
 * made the way the kubelet makes them. After a power cut the parents' old sandboxes (NOTREADY,
 * their containers EXITED) must not keep the checkpoints from activating; when the parents come
 * back, a ready sandbox alone must not withdraw a copy, a created or exited container must.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { type Pod, podId } from "../../lib/core/pod.ts";
import { connectRuntime } from "../../lib/sources/cri.ts";
import { DaemonFixture } from "../admin/harness.ts";
import { firstAnswer, withContainerd } from "../helpers/containerd.ts";
import { CriPods, type PodRef } from "../helpers/cri_pods.ts";

const APISERVER = "kube-system/kube-apiserver-7x2kq";
const CONTROLLER = "kube-system/kube-controller-manager-m4t9z";
const SCHEDULER = "kube-system/kube-scheduler-q8w2c";
const PARENTS = [APISERVER, CONTROLLER, SCHEDULER];

function ref(pod: Pod): PodRef {
  return { namespace: pod.metadata.namespace, name: pod.metadata.name, uid: pod.metadata.uid! };
}

Deno.test("real containerd: checkpoints activate over a parent's old exited sandbox; a ready sandbox alone keeps the copy, a container withdraws it", async () => {
  await withContainerd(async (containerd) => {
    const f = await DaemonFixture.start({ containerRuntimeEndpoint: containerd.endpoint });
    const pods = new CriPods(containerd.endpoint, `${f.node.root}/var/log/pods`);
    const runtime = connectRuntime(containerd.endpoint, 5_000);
    try {
      await firstAnswer(runtime, containerd);
      await containerd.importTestImage();
      const parents = new Map(f.node.parents.map((p) => [podId(p), ref(p)]));
      const container = async (id: string, sandbox: string, attempt = 0) =>
        await pods.createContainer(sandbox, parents.get(id)!, "main", attempt);
      const first = new Map<string, string>();
      for (const id of PARENTS) {
        first.set(id, await pods.runSandbox(parents.get(id)!));
        await pods.startContainer(await container(id, first.get(id)!));
      }
      const taken = await f.pass();
      assertEquals([taken.complete, taken.plan.starts], [true, []]);
      for (const id of PARENTS) assertEquals(taken.plan.state[id], { state: "inactive" });

      // Power cut: every sandbox stops, and the runtime keeps them, NOTREADY, across its restart.
      for (const sandbox of first.values()) await pods.stopSandbox(sandbox);
      await containerd.restart("SIGKILL");
      await firstAnswer(runtime, containerd);
      await f.node.loseControlPlane();
      const boot = await f.pass();
      assertEquals(boot.failures.map((x) => x.source).sort(), ["apiserver", "kubelet"]);
      assertEquals(boot.plan.starts, PARENTS);
      // The kubelet runs the copies (static pods, named after the node); they are not parents.
      for (const id of PARENTS) {
        const [namespace, name] = id.split("/");
        const copy = { namespace, name: `${name}-cp-1`, uid: `copy-${name}` };
        await pods.startContainer(
          await pods.createContainer(await pods.runSandbox(copy), copy, "main"),
        );
      }
      assertEquals((await f.pass()).changes, []);

      // The API server is back; the kubelet makes each parent a new sandbox, no container yet.
      await f.node.restoreControlPlane();
      const second = new Map<string, string>();
      for (const id of PARENTS) second.set(id, await pods.runSandbox(parents.get(id)!, 1));
      const waiting = await f.pass();
      assertEquals([waiting.complete, waiting.plan.stops, waiting.changes], [true, [], []]);

      // The apiserver's container is created, the controller-manager's exits (its port taken):
      // both have shown the kubelet can start them. The scheduler still has its sandbox only.
      await container(APISERVER, second.get(APISERVER)!, 1);
      const exited = await container(CONTROLLER, second.get(CONTROLLER)!, 1);
      await pods.startContainer(exited);
      await pods.stopContainer(exited);
      const handed = await f.pass();
      assertEquals(handed.plan.stops, [APISERVER, CONTROLLER]);
      assertEquals(handed.plan.state[SCHEDULER], { state: "active" });

      await pods.startContainer(await container(SCHEDULER, second.get(SCHEDULER)!, 1));
      assertEquals((await f.pass()).plan.stops, [SCHEDULER]);
    } finally {
      await pods.removeAll();
      pods.close();
      runtime.close();
      await f.close();
    }
  });
});
