/**
 * GET /v1/plan: without the token, the last pass's plan, from memory, so that no request a local
 * user makes reaches the API server, the kubelet or the runtime; with the token, a fresh dry run
 * that writes nothing.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { formatInstant } from "../../lib/core/time.ts";
import type { ServedFixture } from "./harness.ts";
import { withServedDaemon } from "./harness.ts";

const TOKEN = "s3cr3t-admin-token-0123456789abcdef";
const CHECKPOINTS = [
  "kube-system/kube-apiserver-7x2kq",
  "kube-system/kube-controller-manager-m4t9z",
  "kube-system/kube-scheduler-q8w2c",
];

async function plan(f: ServedFixture, authorization?: string) {
  const response = await f.request("/v1/plan", {
    headers: authorization === undefined ? {} : { authorization },
  });
  return { status: response.status, body: await response.json() };
}

/** Every request the node's peers have received so far: the API server and both kubelet ports. */
function peerRequests(f: ServedFixture): number {
  const { apiServer, kubelet } = f.node;
  return apiServer.requests.length + kubelet.secure.requests.length +
    (kubelet.readonly?.requests.length ?? 0);
}

Deno.test("plan without the token: the last pass's plan, said to be so, and not one request to the node's peers", async () => {
  await withServedDaemon({ prepare: (f) => f.writeToken(TOKEN) }, async (f) => {
    assertEquals(await plan(f), {
      status: 503,
      body: { error: "no pass has ended yet; a fresh dry run needs the bearer token" },
    });
    await f.pass();
    // etcd gone: the API server answers 503 and the node is not at rest, where every dry run
    // would list the pods afresh.
    await f.node.loseControlPlane("etcd-gone");
    const last = await f.pass();
    const before = peerRequests(f);
    for (let i = 0; i < 100; i++) {
      assertEquals(await plan(f), {
        status: 200,
        body: {
          from: "last-pass",
          observedAt: last.startedAt,
          complete: last.complete,
          failures: last.failures,
          crashLooping: {},
          plan: last.plan,
          changes: last.changes,
        },
      });
    }
    assertEquals(peerRequests(f) - before, 0);
  });
});

Deno.test("plan with the token: what the next pass would do, from a fresh look, written nowhere", async () => {
  await withServedDaemon({ prepare: (f) => f.writeToken(TOKEN) }, async (f) => {
    await f.pass();
    await f.node.loseControlPlane();
    const before = peerRequests(f);
    const { status, body } = await plan(f, `Bearer ${TOKEN}`);
    assertEquals([status, body.from, body.complete], [200, "dry-run", false]);
    assertEquals(body.observedAt, formatInstant(f.clock.now()));
    assertEquals(
      body.failures.map((x: { source: string; kind: string }) => `${x.source} ${x.kind}`),
      ["apiserver unreachable", "kubelet forbidden"],
    );
    assertEquals(body.plan.starts, CHECKPOINTS);
    assertEquals(
      body.changes.map((c: { from: string; to: string }) => `${c.from}->${c.to}`),
      ["inactive->active", "inactive->active", "inactive->active"],
    );
    // It asked (the kubelet answered 403, the API server did not answer at all)...
    assertEquals(peerRequests(f) > before, true);
    // ... and started nothing: no manifest in the static-pod dir, the store unchanged.
    for (const id of CHECKPOINTS) assertEquals(f.stores.status.get(id)!.state, "inactive");
    const statics = [...Deno.readDirSync(f.config.staticPodDir)].map((e) => e.name);
    assertEquals(statics, ["etcd.yaml"]);
  });
});

Deno.test("plan with a wrong token, or with one while tokens are disabled, is refused and asks nothing", async () => {
  await withServedDaemon({ prepare: (f) => f.writeToken(TOKEN) }, async (f) => {
    await f.pass();
    const before = peerRequests(f);
    assertEquals(await plan(f, "Bearer nope"), { status: 401, body: { error: "wrong token" } });
    await Deno.remove(f.config.adminTokenFile);
    assertEquals((await plan(f, `Bearer ${TOKEN}`)).status, 403);
    assertEquals((await plan(f)).body.from, "last-pass");
    assertEquals(peerRequests(f) - before, 0);
  });
});
