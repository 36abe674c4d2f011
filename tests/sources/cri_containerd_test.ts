/**
 * The CRI client and the embedded schema against a real containerd (Debian's 1.6, which CI
 * installs with apt), started privately (tests/helpers/containerd.ts): empty lists, restarts,
 * and the running rule on real sandboxes and containers in every state.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { connectRuntime } from "../../lib/sources/cri.ts";
import { firstAnswer, withContainerd } from "../helpers/containerd.ts";
import { CriPods } from "../helpers/cri_pods.ts";
import { criCall } from "./cri_call.ts";

const TIMEOUT_MS = 5_000;

Deno.test("real containerd: version, empty pod lists, unknown sandbox", async () => {
  await withContainerd(async (containerd) => {
    const client = connectRuntime(containerd.endpoint, TIMEOUT_MS);
    try {
      assertEquals(await firstAnswer(client, containerd), []);
      for (const api of ["v1", "v1alpha2"] as const) {
        const answer = await criCall(containerd.endpoint, api, "Version", {
          version: "0.1.0",
        }) as Record<string, string>;
        assertEquals(
          [answer.runtime_name, answer.runtime_api_version],
          ["containerd", api],
          JSON.stringify(answer),
        );
      }
      const status = await client.sandboxStatus("0123456789abcdef");
      assertEquals(status.ok ? "answered" : status.failure.kind, "not-found");
    } finally {
      client.close();
    }
  });
});

for (const [signal, how] of [["SIGKILL", "a crash"], ["SIGTERM", "a graceful stop"]] as const) {
  Deno.test(`real containerd: ${how} and restart of the runtime is at worst an unreachable pass, then answers again`, async () => {
    await withContainerd(async (containerd) => {
      const client = connectRuntime(containerd.endpoint, TIMEOUT_MS);
      try {
        for (let restart = 1; restart <= 3; restart++) {
          assertEquals(await firstAnswer(client, containerd), []);
          await containerd.restart(signal);
          // Whatever the first call after the stop meets (a dead connection, no socket yet, a
          // runtime still starting), it is a failure value, never an exception or a crash.
          const during = await client.listRunningPods();
          if (!during.ok) {
            assertEquals(["unreachable", "server-error"].includes(during.failure.kind), true);
          }
        }
        assertEquals(await firstAnswer(client, containerd), []);
      } finally {
        client.close();
      }
    });
  });
}

Deno.test("real containerd: the running rule on real sandboxes and containers in every state", async () => {
  await withContainerd(async (containerd) => {
    const client = connectRuntime(containerd.endpoint, TIMEOUT_MS);
    const logs = await Deno.makeTempDir({ prefix: "ctd-logs-" });
    const pods = new CriPods(containerd.endpoint, logs);
    const running = async () =>
      Object.fromEntries(
        (await firstAnswer(client, containerd)).map((p) => [p.name, p.sandboxIds.length]),
      );
    const ref = (name: string) => ({ namespace: "kube-system", name, uid: `uid-${name}` });
    try {
      await firstAnswer(client, containerd);
      await containerd.importTestImage();
      // A pod that ran before a power cut: its sandbox NOTREADY, its container EXITED.
      const before = await pods.runSandbox(ref("rebooted"));
      await pods.startContainer(await pods.createContainer(before, ref("rebooted"), "main"));
      await pods.stopSandbox(before);
      // The runtime keeps them across its own restart, as across the node's.
      await containerd.restart("SIGTERM");
      assertEquals(await running(), {});

      // The kubelet makes a new sandbox: ready, no container yet.
      const now = await pods.runSandbox(ref("rebooted"), 1);
      const other = await pods.runSandbox(ref("started"));
      assertEquals(await running(), {});
      const created = await pods.createContainer(now, ref("rebooted"), "main", 1);
      const started = await pods.createContainer(other, ref("started"), "main");
      assertEquals(await running(), { rebooted: 1, started: 1 });
      await pods.startContainer(started);
      await pods.startContainer(created);
      assertEquals(await running(), { rebooted: 1, started: 1 });
      // Exited (say, its port was taken) while its sandbox is ready: still counts.
      await pods.stopContainer(started);
      assertEquals(await running(), { rebooted: 1, started: 1 });

      // runtime.v1alpha2 names the states the same; the schema is shared.
      for (const api of ["v1", "v1alpha2"] as const) {
        const { containers } = await criCall(containerd.endpoint, api, "ListContainers", {}) as {
          containers: { id: string; state: string }[];
        };
        const states = Object.fromEntries(containers.map((c) => [c.id, c.state]));
        assertEquals([states[created], states[started]], [
          "CONTAINER_RUNNING",
          "CONTAINER_EXITED",
        ], api);
        assertEquals(Object.values(states).filter((s) => s === "CONTAINER_EXITED").length, 2);
      }
    } finally {
      await pods.removeAll();
      pods.close();
      client.close();
      await Deno.remove(logs, { recursive: true });
    }
  });
});
