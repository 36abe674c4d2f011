/** The simulated API server speaks the real wire format: lists, objects and Status errors. */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import type { Pod } from "../../lib/core/pod.ts";
import { type SimApiServer, startSimApiServer } from "../../lib/sim/apiserver.ts";
import { pod } from "../helpers/pods.ts";
import { rawGet, type SimCluster, simCluster, using } from "./harness.ts";

function scheduled(id: string, nodeName: string): Pod {
  const p = pod(id);
  return { ...p, spec: { ...p.spec, nodeName } };
}

async function withServer(
  fn: (
    server: SimApiServer,
    get: (path: string) => Promise<{
      status: number;
      contentType: string;
      json: Record<string, unknown>;
    }>,
    cluster: SimCluster,
  ) => Promise<void>,
) {
  const cluster = await simCluster();
  await using(startSimApiServer(cluster.ca), (server) =>
    fn(server, async (path) => {
      const answer = await rawGet(`${server.url}${path}`, {
        caPem: cluster.ca.certPem,
        ...cluster.nodeClient,
      });
      return {
        status: answer.status,
        contentType: answer.contentType,
        json: JSON.parse(answer.body),
      };
    }, cluster));
}

function names(list: Record<string, unknown>): string[] {
  return (list.items as Pod[]).map((p) => `${p.metadata.namespace}/${p.metadata.name}`);
}

Deno.test("sim API server lists pods as a PodList whose items carry no kind", async () => {
  await withServer(async (server, get) => {
    server.setPods([scheduled("kube-system/a", "n1"), scheduled("default/b", "n2")]);
    const { status, contentType, json } = await get("/api/v1/pods");
    assertEquals([status, contentType], [200, "application/json"]);
    assertEquals([json.kind, json.apiVersion], ["PodList", "v1"]);
    const { kind: _k, apiVersion: _v, ...item } = scheduled("kube-system/a", "n1");
    const [listed] = json.items as Pod[];
    const version = Number((json.metadata as { resourceVersion: string }).resourceVersion);
    // Each object carries the revision that last changed it, as etcd stores it.
    assertEquals(Number(listed.metadata.resourceVersion) <= version, true);
    assertEquals(listed, {
      ...item,
      metadata: { ...item.metadata, resourceVersion: listed.metadata.resourceVersion },
    });

    server.deletePod("default", "b");
    const after = (await get("/api/v1/pods")).json;
    assertEquals(names(after), ["kube-system/a"]);
    assertEquals(
      Number((after.metadata as { resourceVersion: string }).resourceVersion) > version,
      true,
    );
  });
});

Deno.test("sim API server answers an empty list with null items, as Go encodes an empty slice", async () => {
  await withServer(async (server, get) => {
    assertEquals((await get("/api/v1/pods")).json.items, null);
    server.setPods([scheduled("kube-system/a", "n1")]);
    const none = await get("/api/v1/pods?fieldSelector=spec.nodeName%3Dn2");
    assertEquals([none.status, none.json.kind, none.json.items], [200, "PodList", null]);
    assertEquals((await get("/api/v1/namespaces/default/pods")).json.items, null);
  });
});

Deno.test("sim API server honours field selectors and namespaces", async () => {
  await withServer(async (server, get) => {
    server.setPods([
      scheduled("kube-system/a", "n1"),
      scheduled("default/b", "n1"),
      scheduled("kube-system/c", "n2"),
    ]);
    assertEquals(names((await get("/api/v1/pods?fieldSelector=spec.nodeName%3Dn1")).json), [
      "kube-system/a",
      "default/b",
    ]);
    assertEquals(names((await get("/api/v1/pods?fieldSelector=spec.nodeName!%3Dn1")).json), [
      "kube-system/c",
    ]);
    assertEquals(names((await get("/api/v1/namespaces/kube-system/pods")).json), [
      "kube-system/a",
      "kube-system/c",
    ]);
    assertEquals(
      names((await get("/api/v1/namespaces/kube-system/pods?fieldSelector=spec.nodeName=n2")).json),
      ["kube-system/c"],
    );
    const unsupported = await get("/api/v1/pods?fieldSelector=status.phase%3DRunning");
    assertEquals([unsupported.status, unsupported.json.reason, unsupported.json.message], [
      400,
      "BadRequest",
      "field label not supported: status.phase",
    ]);
  });
});

Deno.test("sim API server answers a missing object with a NotFound Status", async () => {
  await withServer(async (_server, get) => {
    const { status, json } = await get("/api/v1/namespaces/kube-system/secrets/absent");
    assertEquals(status, 404);
    assertEquals(json, {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: 'secrets "absent" not found',
      reason: "NotFound",
      details: { name: "absent", kind: "secrets" },
      code: 404,
    });
    assertEquals((await get("/apis/apps/v1/deployments")).json.reason, "NotFound");
  });
});

Deno.test("sim API server serves secrets and configmaps as v1 objects", async () => {
  await withServer(async (server, get) => {
    server.setSecret("kube-system", "s", { key: "value" });
    server.setConfigMap("kube-system", "c", { text: "t" }, { bin: new Uint8Array([255]) });
    const secret = (await get("/api/v1/namespaces/kube-system/secrets/s")).json;
    assertEquals([secret.kind, secret.apiVersion, secret.type, secret.data], [
      "Secret",
      "v1",
      "Opaque",
      { key: "dmFsdWU=" },
    ]);
    assertEquals((secret.metadata as { name: string }).name, "s");
    const configMap = (await get("/api/v1/namespaces/kube-system/configmaps/c")).json;
    assertEquals([configMap.kind, configMap.data, configMap.binaryData], [
      "ConfigMap",
      { text: "t" },
      { bin: "/w==" },
    ]);
  });
});

Deno.test("sim API server outage modes answer with the real Status objects", async () => {
  await withServer(async (server, get) => {
    const expected = [
      ["server-error", 503, "ServiceUnavailable"],
      ["unauthorized", 401, "Unauthorized"],
      ["forbidden", 403, "Forbidden"],
    ] as const;
    for (const [fault, code, reason] of expected) {
      server.setFault(fault);
      const { status, json } = await get("/api/v1/pods");
      assertEquals([status, json.kind, json.status, json.reason, json.code], [
        code,
        "Status",
        "Failure",
        reason,
        code,
      ]);
    }
    assertEquals(server.requestCount("/api/v1/pods"), 3);
  });
});

Deno.test("sim API server without a client certificate answers 401", async () => {
  const cluster = await simCluster();
  await using(startSimApiServer(cluster.ca), async (server) => {
    const answer = await rawGet(`${server.url}/api/v1/pods`, { caPem: cluster.ca.certPem });
    assertEquals([answer.status, JSON.parse(answer.body).reason], [401, "Unauthorized"]);
    assertEquals(server.requests, [{
      method: "GET",
      target: "/api/v1/pods",
      protocol: "http/1.1",
    }]);
  });
});

/** A watch read to its end: the server ends it at its timeoutSeconds. */
async function watchLines(server: SimApiServer, cluster: SimCluster, path: string) {
  const answer = await rawGet(`${server.url}${path}`, {
    caPem: cluster.ca.certPem,
    ...cluster.nodeClient,
  });
  const lines = answer.body.split("\n").filter((line) => line !== "");
  return {
    status: answer.status,
    contentType: answer.contentType,
    events: lines.map((line) => JSON.parse(line) as { type: string; object: Pod }),
  };
}

Deno.test("sim API server watches: from 0 the current objects as ADDED; from a version the changes since; a last bookmark at the timeout", async () => {
  await withServer(async (server, _get, cluster) => {
    server.setPods([scheduled("kube-system/a", "n1"), scheduled("kube-system/b", "n2")]);
    const fromNow = await watchLines(
      server,
      cluster,
      "/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3Dn1&timeoutSeconds=1",
    );
    assertEquals([fromNow.status, fromNow.contentType], [200, "application/json"]);
    assertEquals(fromNow.events.map((e) => [e.type, e.object.kind, e.object.metadata.name]), [
      ["ADDED", "Pod", "a"],
    ]);

    const version = server.revision();
    // a changes, b moves onto n1, then a moves away: seen by n1's watch as entering and leaving.
    server.setPods([
      {
        ...scheduled("kube-system/a", "n1"),
        metadata: { ...pod("kube-system/a").metadata, labels: { x: "1" } },
      },
      scheduled("kube-system/b", "n1"),
    ]);
    server.setPods([scheduled("kube-system/a", "n2"), scheduled("kube-system/b", "n1")]);
    server.deletePod("kube-system", "b");
    const since = await watchLines(
      server,
      cluster,
      `/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3Dn1&resourceVersion=${version}` +
        "&allowWatchBookmarks=true&timeoutSeconds=1",
    );
    assertEquals(since.events.map((e) => [e.type, e.object.metadata.name ?? ""]), [
      ["MODIFIED", "a"],
      ["ADDED", "b"],
      ["DELETED", "a"],
      ["DELETED", "b"],
      ["BOOKMARK", ""],
    ]);
    const versions = since.events.map((e) => Number(e.object.metadata.resourceVersion));
    assertEquals(versions, [...versions].sort((x, y) => x - y));
    assertEquals(versions.at(-1), server.revision());
  });
});

Deno.test("sim API server watches: a compacted version is an ERROR event with a 410 Expired Status", async () => {
  await withServer(async (server, _get, cluster) => {
    const version = server.revision();
    server.setSecret("kube-system", "s", { key: "one" });
    server.compact();
    const expired = await watchLines(
      server,
      cluster,
      `/api/v1/namespaces/kube-system/secrets?watch=true&fieldSelector=metadata.name%3Ds&resourceVersion=${version}`,
    );
    assertEquals(expired.events.length, 1);
    const [event] = expired.events as unknown as {
      type: string;
      object: Record<string, unknown>;
    }[];
    assertEquals([event.type, event.object.kind, event.object.code, event.object.reason], [
      "ERROR",
      "Status",
      410,
      "Expired",
    ]);
  });
});

Deno.test("sim API server lists secrets and configmaps by name, with the list's version", async () => {
  await withServer(async (server, get) => {
    server.setSecret("kube-system", "s", { key: "value" });
    server.setSecret("kube-system", "t", { key: "other" });
    const { json } = await get(
      "/api/v1/namespaces/kube-system/secrets?fieldSelector=metadata.name%3Ds",
    );
    assertEquals([json.kind, (json.items as Pod[]).map((i) => i.metadata.name)], ["SecretList", [
      "s",
    ]]);
    assertEquals(
      (json.metadata as { resourceVersion: string }).resourceVersion,
      String(server.revision()),
    );
    const none = await get(
      "/api/v1/namespaces/kube-system/configmaps?fieldSelector=metadata.name%3Dc",
    );
    assertEquals([none.json.kind, none.json.items], ["ConfigMapList", null]);
    assertEquals(server.requestsByVerb(), { list: 2, get: 0, watch: 0, other: 0 });
  });
});

Deno.test("sim API server refuses watches on request, and counts them apart", async () => {
  await withServer(async (server, get) => {
    server.setWatchMode("forbidden");
    assertEquals((await get("/api/v1/pods?watch=true")).status, 403);
    server.setWatchMode("method-not-allowed");
    assertEquals((await get("/api/v1/pods?watch=true")).status, 405);
    assertEquals((await get("/api/v1/pods")).status, 200);
    assertEquals(server.requestsByVerb(), { list: 1, get: 0, watch: 2, other: 0 });
  });
});

Deno.test("sim API server watches: a BOOKMARK every bookmarkIntervalMs to a watch that allowed them, none to one that did not", async () => {
  const cluster = await simCluster();
  await using(startSimApiServer(cluster.ca, { bookmarkIntervalMs: 100 }), async (server) => {
    server.setSecret("kube-system", "s", { key: "one" });
    const from = server.revision();
    const path = (bookmarks: boolean) =>
      `/api/v1/namespaces/kube-system/secrets?watch=true&resourceVersion=${from}` +
      `&timeoutSeconds=1${bookmarks ? "&allowWatchBookmarks=true" : ""}`;
    const [allowed, not] = await Promise.all([
      watchLines(server, cluster, path(true)),
      watchLines(server, cluster, path(false)),
    ]);
    // The periodic ones within the second, and the last one at the timeout.
    const types = allowed.events.map((e) => e.type);
    assertEquals(types.length > 2 && types.every((t) => t === "BOOKMARK"), true, String(types));
    assertEquals(
      new Set(allowed.events.map((e) => [e.object.kind, e.object.metadata.resourceVersion].join())),
      new Set([`Secret,${from}`]),
    );
    assertEquals(not.events, []);
  });
});
