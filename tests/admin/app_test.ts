/**
 * The admin endpoint over real HTTP on 127.0.0.1, backed by a real daemon on a simulated node:
 * every route and every error status, ids as an attacker would shape them, and the request log.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { MAX_BODY_BYTES } from "../../lib/admin/body_limit.ts";
import { formatListing, listCheckpoints } from "../../lib/commands/status.ts";
import { podId } from "../../lib/core/pod.ts";
import { formatInstant } from "../../lib/core/time.ts";
import { POLL_MS, runFor } from "../helpers/promotion.ts";
import {
  APISERVER,
  badRollout,
  rawGetJson,
  type ServedFixture,
  START,
  withServedDaemon,
} from "./harness.ts";

const TOKEN = "s3cr3t-admin-token-0123456789abcdef";
const CHECKPOINTS = [
  APISERVER,
  "kube-system/kube-controller-manager-m4t9z",
  "kube-system/kube-scheduler-q8w2c",
];

async function getJson(f: ServedFixture, path: string) {
  const response = await f.request(path);
  assertEquals(response.headers.get("content-type"), "application/json");
  return { status: response.status, body: await response.json(), headers: response.headers };
}

Deno.test("healthz: 200 while the loop ticks within 3 poll intervals, from the start, else 503", async () => {
  await withServedDaemon({ config: { pollIntervalMs: 1_000 } }, async (f) => {
    // No pass yet: measured from the start.
    let health = await getJson(f, "/healthz");
    assertEquals(health.status, 200);
    assertEquals(health.body.status, "ok");
    f.clock.advance(3_000);
    assertEquals((await getJson(f, "/healthz")).status, 200);
    f.clock.advance(1);
    health = await getJson(f, "/healthz");
    assertEquals(health.status, 503);
    assertEquals(health.body.error, "the loop has not ticked for 3.001 s (limit 3 s)");
    assertEquals(health.body.lastTick, undefined);

    await f.pass();
    health = await getJson(f, "/healthz");
    assertEquals(health.status, 200);
    assertEquals(health.body.lastTick, formatInstant(f.clock.now()));
    f.clock.advance(3_001);
    health = await getJson(f, "/healthz");
    assertEquals(health.status, 503);
    assertEquals(health.body.secondsSinceTick, 3.001);
  });
});

Deno.test("readyz: 503 until the first pass has finished, then 200 with how it went", async () => {
  await withServedDaemon({}, async (f) => {
    let ready = await getJson(f, "/readyz");
    assertEquals(ready, {
      status: 503,
      body: {
        error: "no pass has finished yet",
        ready: false,
        notReady: [{ reason: "no-pass", message: "no pass has finished yet" }],
        lastPassFailures: [],
        stalledStarts: [],
        notRecorded: { checkpoints: [], sandboxes: [] },
      },
      headers: ready.headers,
    });

    await f.pass();
    ready = await getJson(f, "/readyz");
    assertEquals([ready.status, ready.body], [200, {
      status: "ready",
      ready: true,
      notReady: [],
      lastPassAt: formatInstant(START),
      lastPassComplete: true,
      lastCompletePassAt: formatInstant(START),
      lastPassFailures: [],
      stalledStarts: [],
      notRecorded: { checkpoints: [], sandboxes: [] },
    }]);
  });
});

Deno.test("checkpoints: list and one, with state, deadline, status record, phase and paths", async () => {
  await withServedDaemon({}, async (f) => {
    assertEquals((await getJson(f, "/v1/checkpoints")).body, { checkpoints: [] });
    await f.pass();
    f.clock.advance(10_000);
    await f.node.loseControlPlane();
    await f.pass();
    // Back, but the API server no longer knows the apiserver's parent: a grace period starts.
    f.clock.advance(5_000);
    await f.node.restoreControlPlane();
    await f.node.deleteParent(APISERVER);
    await f.pass();

    const list = await getJson(f, "/v1/checkpoints");
    assertEquals(list.status, 200);
    assertEquals(list.body.checkpoints.map((c: { id: string }) => c.id), CHECKPOINTS);

    const one = await getJson(f, `/v1/checkpoints/${APISERVER}`);
    assertEquals(one.status, 200);
    assertEquals(one.body, list.body.checkpoints[0]);
    const created = formatInstant(START);
    const activated = formatInstant(START + 10_000_000_000n);
    const now = formatInstant(START + 15_000_000_000n);
    const graceEnd = formatInstant(START + 75_000_000_000n);
    const cfg = f.config;
    assertEquals(one.body, {
      id: APISERVER,
      namespace: "kube-system",
      name: "kube-apiserver-7x2kq",
      state: "active-grace",
      graceEnd,
      since: activated,
      status: {
        id: APISERVER,
        state: "active-grace",
        graceEnd,
        createdAt: created,
        lastActivatedAt: activated,
        reason: one.body.status.reason,
        message: one.body.status.message,
        phase: "activated",
      },
      paths: {
        inactiveManifest: join(cfg.inactiveDir, "kube-system-kube-apiserver-7x2kq.json"),
        activeManifest: join(cfg.staticPodDir, "kube-system-kube-apiserver-7x2kq.json"),
        secretsDir: join(cfg.secretsDir, "kube-system", "kube-apiserver-7x2kq"),
        configmapsDir: join(cfg.configmapsDir, "kube-system", "kube-apiserver-7x2kq"),
      },
      versions: { kept: 1, versions: [1] },
    });
    // The others were withdrawn when their parents came back: deactivated, since then.
    const scheduler = list.body.checkpoints[2];
    assertEquals([scheduler.state, scheduler.status.phase, scheduler.since], [
      "inactive",
      "deactivated",
      now,
    ]);

    const missing = await getJson(f, "/v1/checkpoints/kube-system/nothing-here");
    assertEquals([missing.status, missing.body], [404, {
      error: "no checkpoint kube-system/nothing-here",
    }]);
  });
});

Deno.test("checkpoints and plan: a parent crash-looping on an unproven spec has its checkpoint active for that reason, and its candidate said so", async () => {
  const config = { promoteAfterMs: 60_000, pollIntervalMs: POLL_MS };
  await withServedDaemon({ config }, async (f) => {
    await f.pass();
    const bad = podId(await badRollout(f));
    await runFor(f, 80_000);

    const view = (await getJson(f, `/v1/checkpoints/${bad}`)).body;
    assertEquals([view.state, view.status.reason, view.status.message], [
      "active",
      "ParentCrashLooping",
      "parent crash-looping on an unproven spec: kept version 1 active",
    ]);
    assertEquals([view.versions.kept, view.versions.inheritedFrom], [1, {
      id: APISERVER,
      version: 1,
    }]);
    const { version, waiting, crashLooping } = view.versions.candidate;
    assertEquals({ version, waiting, crashLooping }, {
      version: 2,
      waiting: "not Ready",
      crashLooping: true,
    });
    // The others are not: their parents run their kept versions.
    const others = (await getJson(f, "/v1/checkpoints")).body.checkpoints
      .filter((c: { id: string }) => c.id !== bad);
    assertEquals(others.map((c: { state: string }) => c.state), ["inactive", "inactive"]);
    assertEquals(others.map((c: { versions: object }) => "candidate" in c.versions), [
      false,
      false,
    ]);

    // What the planner was told, with the plan it made.
    assertEquals((await getJson(f, "/v1/plan")).body.crashLooping, { [bad]: 1 });
    // `ckpt-agent status`, from the agent.
    const listing = formatListing(
      await listCheckpoints({ ...f.config, adminListen: f.server.address }),
    );
    const row = listing.split("\n").find((line) => line.startsWith(bad))!;
    assert(
      / active .* 1 \(from \S+ v1\) +1 +2 since \S+ \(not Ready; crash-looping\)$/.test(row),
      row,
    );
  });
});

Deno.test("checkpoint ids are validated before any lookup: traversal shapes and bad names get 400", async () => {
  await withServedDaemon({}, async (f) => {
    await f.pass();
    const bad = [
      "/v1/checkpoints/..",
      "/v1/checkpoints/../etc",
      "/v1/checkpoints/kube-system/..",
      "/v1/checkpoints/%2e%2e/%2e%2e",
      "/v1/checkpoints/%2E%2E/passwd",
      "/v1/checkpoints/kube-system%2Fkube-apiserver-7x2kq",
      "/v1/checkpoints/kube-system/..%2F..%2Fetc%2Fpasswd",
      "/v1/checkpoints/kube-system/kube-apiserver-7x2kq/extra",
      "/v1/checkpoints/kube-system/",
      "/v1/checkpoints/",
      "/v1/checkpoints/Kube-System/x",
      "/v1/checkpoints/kube-system/a_b",
      "/v1/checkpoints/kube-system/%00",
      `/v1/checkpoints/kube-system/${"a".repeat(254)}`,
      `/v1/checkpoints/${"n".repeat(64)}/x`,
    ];
    for (const path of bad) {
      const answer = await rawGetJson(f, path);
      assertEquals([path, answer.status], [path, 400]);
      assertEquals(
        answer.body.error,
        "bad checkpoint id: expected /v1/checkpoints/<namespace>/<name> with Kubernetes names",
      );
    }
    // The same checks hold for fetch, which resolves dot segments before sending: those become
    // other paths, and never reach a checkpoint.
    assertEquals((await f.request("/v1/checkpoints/%2e%2e/x")).status, 404);
    // A good id over the raw path works, so the 400s above are not an artefact of raw requests.
    assertEquals((await rawGetJson(f, `/v1/checkpoints/${APISERVER}`)).status, 200);
    // The longest valid names are a checkpoint id like any other (docs/design.md#long-names).
    const longest = `${"n".repeat(63)}/${"a".repeat(253)}`;
    assertEquals((await rawGetJson(f, `/v1/checkpoints/${longest}`)).body, {
      error: `no checkpoint ${longest}`,
    });
  });
});

Deno.test("sandboxes: list and one, and sandbox ids validated with the store's rule", async () => {
  await withServedDaemon({}, async (f) => {
    assertEquals((await getJson(f, "/v1/sandboxes")).body, { sandboxes: [] });
    await f.pass();
    await f.node.loseControlPlane();
    await f.pass(); // activates the checkpoints; the kubelet starts them
    await f.pass(); // records their sandboxes
    const ids = f.stores.sandboxes.list();
    assertEquals(ids.length, 3);

    const list = await getJson(f, "/v1/sandboxes");
    assertEquals(list.body, {
      sandboxes: ids.map((id) => ({ id, checkpoint: f.stores.sandboxes.get(id) })),
    });
    const one = await getJson(f, `/v1/sandboxes/${ids[0]}`);
    assertEquals([one.status, one.body], [200, {
      id: ids[0],
      checkpoint: f.stores.sandboxes.get(ids[0]),
    }]);
    assertEquals((await getJson(f, "/v1/sandboxes/0123abcd")).status, 404);

    for (
      const path of [
        "/v1/sandboxes/..",
        "/v1/sandboxes/%2e%2e",
        "/v1/sandboxes/a%2Fb",
        "/v1/sandboxes/a/b",
        "/v1/sandboxes/.hidden",
        "/v1/sandboxes/",
        `/v1/sandboxes/${"a".repeat(129)}`,
      ]
    ) {
      const answer = await rawGetJson(f, path);
      assertEquals([path, answer.status], [path, 400]);
      assert(String(answer.body.error).startsWith("bad sandbox id"));
    }
  });
});

Deno.test("405 with an Allow header for a wrong method on a known path, 404 for unknown paths", async () => {
  await withServedDaemon({}, async (f) => {
    const cases: [string, string, string][] = [
      ["POST", "/healthz", "GET, HEAD"],
      ["DELETE", "/metrics", "GET, HEAD"],
      ["PUT", "/v1/checkpoints", "GET, HEAD"],
      ["DELETE", `/v1/checkpoints/${APISERVER}`, "GET, HEAD"],
      ["POST", "/v1/sandboxes/abc", "GET, HEAD"],
      ["POST", "/v1/plan", "GET, HEAD"],
      ["GET", "/v1/reconcile", "POST"],
      ["OPTIONS", "/v1/reconcile", "POST"],
    ];
    for (const [method, path, allow] of cases) {
      const response = await f.request(path, { method });
      assertEquals([method, path, response.status], [method, path, 405]);
      assertEquals(response.headers.get("allow"), allow);
      assertEquals(await response.json(), { error: `${method} not allowed; use ${allow}` });
    }
    const head = await f.request("/healthz", { method: "HEAD" });
    assertEquals([head.status, await head.text()], [200, ""]);
    for (const path of ["/", "/v1", "/v1/checkpointsx", "/healthz/x", "/v2/checkpoints"]) {
      const answer = await getJson(f, path);
      assertEquals([path, answer.status, answer.body], [path, 404, { error: "not found" }]);
    }
  });
});

Deno.test("413 for bodies over 64 KiB, by Content-Length and by the bytes actually sent", async () => {
  await withServedDaemon({}, async (f) => {
    const tooLarge = { error: `request body larger than ${MAX_BODY_BYTES} bytes` };
    // Exactly the limit passes the check (and then meets the token check).
    let response = await f.request("/v1/reconcile", {
      method: "POST",
      body: new Uint8Array(MAX_BODY_BYTES),
    });
    assertEquals(response.status, 403);
    await response.body?.cancel();

    response = await f.request("/v1/reconcile", {
      method: "POST",
      body: new Uint8Array(MAX_BODY_BYTES + 1),
    });
    assertEquals([response.status, await response.json()], [413, tooLarge]);

    // Chunked: no Content-Length to trust; the streamed bytes are counted.
    let streamed = 20;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        controller.enqueue(new Uint8Array(4096));
        if (--streamed === 0) controller.close();
      },
    });
    response = await f.request("/v1/reconcile", { method: "POST", body: stream });
    assertEquals([response.status, await response.json()], [413, tooLarge]);

    // A declared length over the limit is refused before a byte of the body is read.
    const declared = await f.raw(
      `POST /v1/reconcile HTTP/1.1\r\nContent-Length: ${MAX_BODY_BYTES * 2}`,
      new Uint8Array(MAX_BODY_BYTES * 2),
    );
    assertEquals([declared.status, JSON.parse(declared.body)], [413, tooLarge]);
  });
});

Deno.test("on loopback, a request naming another host is refused with 421 (DNS rebinding)", async () => {
  await withServedDaemon({}, async (f) => {
    const port = f.server.address.split(":")[1];
    for (const host of ["evil.example", `evil.example:${port}`, `192.0.2.1:${port}`, "[::2]"]) {
      const answer = await f.raw(`GET /v1/checkpoints HTTP/1.1\r\nHost: ${host}`);
      assertEquals([host, answer.status], [host, 421]);
      assertEquals(JSON.parse(answer.body), {
        error: "this endpoint answers only requests addressed to a loopback host",
      });
    }
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, "[::1]", "127.0.0.2"]) {
      const answer = await f.raw(`GET /v1/checkpoints HTTP/1.1\r\nHost: ${host}`);
      assertEquals([host, answer.status], [host, 200]);
    }
  });
});

Deno.test("an internal error answers 500 internal error, with no stack, and is logged", async () => {
  await withServedDaemon({ prepare: (f) => f.writeToken(TOKEN) }, async (f) => {
    // The static-pod dir replaced by a file: reading it fails in a way a pass does not expect.
    await Deno.remove(f.config.staticPodDir, { recursive: true });
    await Deno.writeTextFile(f.config.staticPodDir, "not a directory\n");
    const response = await f.request("/v1/plan", {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    assertEquals(response.status, 500);
    const text = await response.text();
    assertEquals(JSON.parse(text), { error: "internal error" });
    assert(!text.includes("at "), text);
    const logged = f.log.find("admin: request failed");
    assertEquals(logged.length, 1);
    assertEquals([logged[0].level, logged[0].path], ["error", "/v1/plan"]);
    assert(String(logged[0].error).length > 0);
  });
});

Deno.test("every request, a metrics scrape included, is logged at debug as one structured line: method, path, status, duration", async () => {
  await withServedDaemon({}, async (f) => {
    await (await f.request("/healthz")).body?.cancel();
    await (await f.request("/metrics")).body?.cancel();
    await (await f.request("/nope?x=1")).body?.cancel();
    await f.raw("GET /v1/checkpoints/%2e%2e/x HTTP/1.1");
    await (await f.request("/v1/reconcile", { method: "POST" })).body?.cancel();
    const lines = f.log.find("admin request");
    assertEquals(
      lines.map((l) => [l.level, l.method, l.path, l.status]),
      [
        ["debug", "GET", "/healthz", 200],
        ["debug", "GET", "/metrics", 200],
        ["debug", "GET", "/nope", 404],
        ["debug", "GET", "/v1/checkpoints/%2e%2e/x", 400],
        ["debug", "POST", "/v1/reconcile", 403],
      ],
    );
    for (const line of lines) {
      assertEquals(typeof line.durationMs, "number");
      assertEquals(typeof line.time, "string");
    }
  });
});
