/** The simulated runtime answers CRI filters and verbosity as a runtime does. */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { CriSimServer, type SimPod } from "../../lib/sim/cri_server.ts";
import { criCall } from "../sources/cri_call.ts";

const PODS: SimPod[] = [
  {
    namespace: "kube-system",
    name: "etcd",
    uid: "u1",
    ready: true,
    containers: [{ name: "etcd", state: "running" }],
  },
  {
    namespace: "kube-system",
    name: "kube-apiserver",
    uid: "u2",
    ready: false,
    containers: [{ name: "kube-apiserver", state: "exited" }],
  },
];

async function withSim(test: (sim: CriSimServer) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "cri-sim-" });
  const sim = await CriSimServer.start({ socketPath: `${dir}/sim.sock` });
  try {
    sim.setPods(PODS);
    await test(sim);
  } finally {
    await sim.close();
    await Deno.remove(dir, { recursive: true });
  }
}

async function sandboxIds(sim: CriSimServer, filter: unknown): Promise<string[]> {
  const answer = await criCall(sim.endpoint, "v1", "ListPodSandbox", { filter }) as {
    items: { id: string }[];
  };
  return answer.items.map((item) => item.id);
}

async function containerIds(sim: CriSimServer, filter: unknown): Promise<string[]> {
  const answer = await criCall(sim.endpoint, "v1", "ListContainers", { filter }) as {
    containers: { id: string }[];
  };
  return answer.containers.map((container) => container.id);
}

Deno.test("sim: sandbox filters by id, state and labels, all ANDed", async () => {
  await withSim(async (sim) => {
    assertEquals(await sandboxIds(sim, null), ["sandbox-u1", "sandbox-u2"]);
    assertEquals(await sandboxIds(sim, { id: "sandbox-u2" }), ["sandbox-u2"]);
    assertEquals(await sandboxIds(sim, { state: { state: "SANDBOX_NOTREADY" } }), ["sandbox-u2"]);
    assertEquals(
      await sandboxIds(sim, { label_selector: { "io.kubernetes.pod.name": "etcd" } }),
      ["sandbox-u1"],
    );
    assertEquals(
      await sandboxIds(sim, {
        state: { state: "SANDBOX_READY" },
        label_selector: { "io.kubernetes.pod.name": "kube-apiserver" },
      }),
      [],
    );
  });
});

Deno.test("sim: container filters by id, state, sandbox and labels", async () => {
  await withSim(async (sim) => {
    assertEquals(await containerIds(sim, null), [
      "sandbox-u1-etcd",
      "sandbox-u2-kube-apiserver",
    ]);
    assertEquals(await containerIds(sim, { id: "sandbox-u1-etcd" }), ["sandbox-u1-etcd"]);
    assertEquals(await containerIds(sim, { state: { state: "CONTAINER_EXITED" } }), [
      "sandbox-u2-kube-apiserver",
    ]);
    assertEquals(await containerIds(sim, { pod_sandbox_id: "sandbox-u2" }), [
      "sandbox-u2-kube-apiserver",
    ]);
    assertEquals(
      await containerIds(sim, { label_selector: { "io.kubernetes.container.name": "etcd" } }),
      ["sandbox-u1-etcd"],
    );
  });
});

Deno.test("sim: sandbox status carries the verbose info only when asked", async () => {
  await withSim(async (sim) => {
    const status = (verbose: boolean) =>
      criCall(sim.endpoint, "v1", "PodSandboxStatus", { pod_sandbox_id: "sandbox-u1", verbose })
        .then((answer) => Object.keys((answer as { info: Record<string, string> }).info));
    assertEquals(await status(false), []);
    assertEquals(await status(true), ["info"]);
  });
});
