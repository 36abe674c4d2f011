/**
 * The CRI client and the embedded schema against a real containerd (Debian's 1.6, which CI
 * installs with apt), started privately: its root, state and sockets live in a temp dir.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { connectRuntime } from "../../lib/sources/cri.ts";
import { firstAnswer, withContainerd } from "../helpers/containerd.ts";
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
