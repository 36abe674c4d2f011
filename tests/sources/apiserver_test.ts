/** The API server client against the simulated API server, over real mTLS. */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import * as v from "valibot";
import type { Pod } from "../../lib/core/pod.ts";
import {
  type ApiServerClient,
  askServerTime,
  createApiServerClient,
  PodListSchema,
} from "../../lib/sources/apiserver.ts";
import { getJson } from "../../lib/sources/http.ts";
import { type Credentials, loadKubeconfig } from "../../lib/sources/kubeconfig.ts";
import type { SourceResult } from "../../lib/sources/types.ts";
import { type SimApiServer, startSimApiServer } from "../../lib/sim/apiserver.ts";
import { startSimPeer } from "../../lib/sim/peer.ts";
import { createSimCa, type KubeconfigSpec, writeKubeconfig } from "../../lib/sim/pki.ts";
import { pod } from "../helpers/pods.ts";
import { NODE_NAME, type SimCluster, simCluster, withTempDir } from "../sim/harness.ts";
import { value } from "../helpers/source_result.ts";

const TIMEOUT_MS = 5_000;

function onNode(id: string, nodeName: string): Pod {
  const p = pod(id);
  return { ...p, spec: { ...p.spec, nodeName } };
}

function failure<T>(result: SourceResult<T>) {
  if (result.ok) throw new Error(`expected a failure, got ${JSON.stringify(result.value)}`);
  return result.failure;
}

interface Fixture {
  cluster: SimCluster;
  server: SimApiServer;
  dir: string;
  /** Credentials from a kubeconfig written for the simulated server (the node's cert by default). */
  credentials(spec?: Partial<KubeconfigSpec>): Promise<Credentials>;
  client(spec?: Partial<KubeconfigSpec>, timeoutMs?: number): Promise<ApiServerClient>;
}

async function withApiServer(fn: (f: Fixture) => Promise<void>): Promise<void> {
  const cluster = await simCluster();
  const server = await startSimApiServer(cluster.ca);
  try {
    await withTempDir(async (dir) => {
      const credentials = async (spec: Partial<KubeconfigSpec> = {}) => {
        const path = await writeKubeconfig(dir, {
          server: server.url,
          caPem: cluster.ca.certPem,
          client: cluster.nodeClient,
          embed: "inline",
          ...spec,
        });
        const loaded = loadKubeconfig(path);
        if (!loaded.ok) throw new Error(loaded.error);
        return loaded.credentials;
      };
      const client = async (spec?: Partial<KubeconfigSpec>, timeoutMs = TIMEOUT_MS) =>
        createApiServerClient(await credentials(spec), timeoutMs);
      await fn({ cluster, server, dir, credentials, client });
    });
  } finally {
    await server.close();
  }
}

Deno.test("listNodePods asks with the field selector and gets only this node's pods", async () => {
  await withApiServer(async ({ server, client }) => {
    server.setPods([
      onNode("kube-system/kube-apiserver-a", NODE_NAME),
      onNode("kube-system/kube-apiserver-b", "node-2"),
      onNode("default/web", NODE_NAME),
    ]);
    const pods = value(await (await client()).listNodePods(NODE_NAME));
    assertEquals(pods.map((p) => `${p.metadata.namespace}/${p.metadata.name}`), [
      "kube-system/kube-apiserver-a",
      "default/web",
    ]);
    // Items of a list carry no kind/apiVersion; they are kept as the server sent them.
    assertEquals(pods[0].kind, undefined);
    assertEquals(pods[0].spec, onNode("x/y", NODE_NAME).spec);
    assertEquals(server.requests.map((r) => [r.target, r.authenticatedAs]), [
      [`/api/v1/pods?fieldSelector=spec.nodeName%3D${NODE_NAME}`, `cert:system:node:${NODE_NAME}`],
    ]);
  });
});

Deno.test("listNodePods of a node without pods is an empty list, not a failure", async () => {
  await withApiServer(async ({ server, client }) => {
    server.setPods([onNode("default/web", "node-2")]);
    assertEquals(await (await client()).listNodePods(NODE_NAME), { ok: true, value: [] });
    assertEquals(server.deletePod("default", "web"), true);
    assertEquals(await (await client()).listNodePods("node-2"), { ok: true, value: [] });
  });
});

Deno.test("listNodePods during an outage is a failure of the right kind, never an empty list", async () => {
  await withApiServer(async ({ server, client }) => {
    server.setPods([onNode("default/web", NODE_NAME)]);
    const api = await client();
    const cases = [
      ["server-error", "server-error", 503, "etcdserver: no leader"],
      ["unauthorized", "unauthorized", 401, "Unauthorized"],
      ["forbidden", "forbidden", 403, "cannot get path"],
    ] as const;
    for (const [fault, kind, status, quoted] of cases) {
      server.setFault(fault);
      const f = failure(await api.listNodePods(NODE_NAME));
      assertEquals([f.source, f.kind, f.status], ["apiserver", kind, status]);
      assert(f.message.includes(quoted), f.message);
    }
    server.setFault("none");
    assertEquals(value(await api.listNodePods(NODE_NAME)).length, 1);
  });
});

Deno.test("a 200 that is an HTML page, a body cut short or another kind: unavailable, quoted", async () => {
  await withApiServer(async ({ server, client }) => {
    server.setPods([onNode("default/web", NODE_NAME)]);
    server.setSecret("kube-system", "certs", { "tls.key": "key" });
    const api = await client();
    const cases = [
      ["html", "not JSON (text/html)", '"<!DOCTYPE html>\\n<html><head><title>Service Unavailable'],
      ["truncated", "body cut short", '"{\\"kind\\":\\"PodList\\",\\"apiVersion\\":\\"v1\\"'],
      ["wrong-kind", 'unexpected body: kind: expected "PodList"', '"{\\"kind\\":\\"SecretList\\"'],
    ] as const;
    for (const [fault, problem, start] of cases) {
      server.setFault(fault);
      const f = failure(await api.listNodePods(NODE_NAME));
      assertEquals([fault, f.kind, f.problem], [fault, "bad-response", problem]);
      assert(f.message.includes(`: ${start}`), f.message);
      // And the same for an object.
      const secret = failure(await api.getSecret("kube-system", "certs"));
      assertEquals([fault, secret.kind], [fault, "bad-response"]);
    }
    // Cut short: said at once, with what the promised length was.
    server.setFault("truncated");
    const cut = failure(await (await client({}, 60_000)).listNodePods(NODE_NAME));
    assert(/body cut short after \d+ of \d+ bytes/.test(cut.message), cut.message);
    server.setFault("none");
    assertEquals(value(await api.listNodePods(NODE_NAME)).length, 1);
  });
});

/** A peer answering 200 with `bodies[path]`, and a GET of a PodList from it. */
async function withBodies(
  bodies: Record<string, unknown>,
  fn: (list: (path: string) => Promise<SourceResult<Pod[]>>) => Promise<void>,
) {
  const peer = await startSimPeer({
    handle: (request) => ({ status: 200, body: bodies[request.path] }),
    failure: () => ({ status: 503, body: "" }),
  });
  try {
    await fn((path) =>
      getJson({ source: "apiserver", baseUrl: peer.url, timeoutMs: TIMEOUT_MS }, {
        path,
        schema: PodListSchema,
      })
    );
  } finally {
    await peer.close();
  }
}

Deno.test('"items": null is an empty list, a list without items is not', async () => {
  const bodies: Record<string, unknown> = {
    "/null": { kind: "PodList", apiVersion: "v1", metadata: { resourceVersion: "7" }, items: null },
    "/missing": { kind: "PodList", apiVersion: "v1", metadata: {} },
  };
  await withBodies(bodies, async (list) => {
    assertEquals(await list("/null"), { ok: true, value: [] });
    const missing = failure(await list("/missing"));
    assertEquals([missing.kind, missing.problem], [
      "bad-response",
      "unexpected body: items: missing (array)",
    ]);
  });
});

Deno.test("listNodePods times out on an API server that never answers", async () => {
  await withApiServer(async ({ server, client }) => {
    server.setFault("hang");
    const f = failure(await (await client({}, 200)).listNodePods(NODE_NAME));
    assertEquals(f.kind, "timeout");
    assertEquals(server.requestCount("/api/v1/pods"), 1);
  });
});

Deno.test("listNodePods of a stopped API server is unreachable, and works once it is back", async () => {
  await withApiServer(async ({ server, client }) => {
    const api = await client();
    await server.stopListening();
    assertEquals(failure(await api.listNodePods(NODE_NAME)).kind, "unreachable");
    await server.resumeListening();
    assertEquals(await api.listNodePods(NODE_NAME), { ok: true, value: [] });
  });
});

Deno.test("an API server whose certificate the kubeconfig's CA did not sign is unreachable", async () => {
  await withApiServer(async ({ server, client }) => {
    const stranger = await createSimCa("not-the-cluster-ca");
    const f = failure(await (await client({ caPem: stranger.certPem })).listNodePods(NODE_NAME));
    assertEquals(f.kind, "unreachable");
    assertEquals(server.requests, [], "no request may reach an unverified server");
  });
});

Deno.test("insecure-skip-tls-verify in the kubeconfig is honoured", async () => {
  await withApiServer(async ({ client }) => {
    const api = await client({ caPem: undefined, insecure: true });
    assertEquals(await api.listNodePods(NODE_NAME), { ok: true, value: [] });
  });
});

Deno.test("without a client certificate the API server answers 401: unauthorized", async () => {
  await withApiServer(async ({ client }) => {
    const f = failure(await (await client({ client: undefined })).listNodePods(NODE_NAME));
    assertEquals([f.kind, f.status], ["unauthorized", 401]);
  });
});

Deno.test("a token file is re-read on every request, so a rotated token is used", async () => {
  await withApiServer(async ({ server, client, dir }) => {
    await Deno.writeTextFile(`${dir}/token`, "token-1\n");
    server.acceptTokens(["token-1", "token-2"]);
    const api = await client({ client: undefined, tokenFile: "token" });
    assertEquals((await api.listNodePods(NODE_NAME)).ok, true);
    await Deno.writeTextFile(`${dir}/token`, "token-2\n");
    assertEquals((await api.listNodePods(NODE_NAME)).ok, true);
    assertEquals(server.requests.map((r) => r.authenticatedAs), ["token:token-1", "token:token-2"]);

    await Deno.remove(`${dir}/token`);
    const f = failure(await api.listNodePods(NODE_NAME));
    assertEquals(f.kind, "unauthorized");
    assert(f.message.includes(`cannot read token file ${dir}/token: no such file`), f.message);
    assertEquals(server.requests.length, 2, "nothing is sent without the token");
  });
});

Deno.test("getSecret decodes every value, binary included", async () => {
  await withApiServer(async ({ server, client }) => {
    const binary = new Uint8Array([0, 255, 128, 10]);
    server.setSecret("kube-system", "etcd-client", { "tls.crt": "CERT\n", "raw.bin": binary });
    const secret = value(await (await client()).getSecret("kube-system", "etcd-client"));
    assertEquals(secret, { "tls.crt": new TextEncoder().encode("CERT\n"), "raw.bin": binary });
    assertEquals(server.requestCount("/api/v1/namespaces/kube-system/secrets/etcd-client"), 1);
  });
});

Deno.test("getConfigMap merges data and binaryData", async () => {
  await withApiServer(async ({ server, client }) => {
    const binary = new Uint8Array([1, 2, 3, 254]);
    server.setConfigMap("kube-system", "kube-proxy", { "config.conf": "mode: ipvs\n" }, {
      "blob.bin": binary,
    });
    server.setConfigMap("kube-system", "empty", {});
    const api = await client();
    assertEquals(value(await api.getConfigMap("kube-system", "kube-proxy")), {
      "config.conf": new TextEncoder().encode("mode: ipvs\n"),
      "blob.bin": binary,
    });
    assertEquals(value(await api.getConfigMap("kube-system", "empty")), {});
  });
});

Deno.test("a missing secret or configmap is not-found", async () => {
  await withApiServer(async ({ client }) => {
    const api = await client();
    const secret = failure(await api.getSecret("kube-system", "absent"));
    assertEquals([secret.kind, secret.status], ["not-found", 404]);
    assert(secret.message.endsWith('404 Not Found: secrets "absent" not found'), secret.message);
    assertEquals(failure(await api.getConfigMap("kube-system", "absent")).kind, "not-found");
  });
});

Deno.test("invalid names are refused before any URL is built", async () => {
  await withApiServer(async ({ server, client }) => {
    const api = await client();
    assertEquals(failure(await api.getSecret("kube-system", "../../pods")).kind, "not-found");
    assertEquals(failure(await api.getConfigMap("Kube System", "x")).kind, "not-found");
    assertEquals(failure(await api.listNodePods("node-1&watch=true")).kind, "bad-response");
    assertEquals(server.requests, []);
  });
});

Deno.test("a 200 that is not a PodList is a bad response, not an empty list", async () => {
  // Something that is not Kubernetes (a proxy, a health page) answering on the API server's port.
  const impostor = await startSimPeer({
    handle: () => ({ status: 200, body: { items: [] } }),
    failure: () => ({ status: 503, body: "" }),
  });
  try {
    const api = createApiServerClient({ server: impostor.url, insecure: false }, TIMEOUT_MS);
    const f = failure(await api.listNodePods(NODE_NAME));
    assertEquals(f.kind, "bad-response");
    assertEquals(f.problem, 'unexpected body: kind: expected "PodList"');
    assert(f.message.endsWith(`${f.problem}: "{\\"items\\":[]}"`), f.message);
  } finally {
    await impostor.close();
  }
});

Deno.test("a PodList with an item that is not a pod is refused, naming the item's field", async () => {
  const good = pod("kube-system/a");
  const bodies: Record<string, unknown> = {
    "/nameless": { kind: "PodList", items: [good, { metadata: { namespace: "x" } }] },
    "/labels": {
      kind: "PodList",
      items: [good, good, { metadata: { name: "b", namespace: "x", labels: { tier: 1 } } }],
    },
    "/scalar": { kind: "PodList", items: [7] },
  };
  await withBodies(bodies, async (list) => {
    const messages: Record<string, string> = {};
    for (const path of Object.keys(bodies)) {
      const f = failure(await list(path));
      assertEquals(f.kind, "bad-response");
      messages[path] = f.problem!;
    }
    assertEquals(messages, {
      "/nameless": "unexpected body: items[1].metadata.name: missing (string)",
      "/labels": "unexpected body: items[2].metadata.labels.tier: expected string, received number",
      "/scalar": "unexpected body: items[0]: expected object, received number",
    });
  });
});

Deno.test("PodListSchema keeps the parsed items themselves, every field included", () => {
  const item = { ...pod("kube-system/a"), spec: { nodeName: NODE_NAME, extra: [1, { x: 2 }] } };
  const pods = v.parse(PodListSchema, { kind: "PodList", apiVersion: "v1", items: [item] });
  assertEquals(pods.length, 1);
  assert(pods[0] === item, "a copy of the item");
});

Deno.test("askServerTime reads the API server's clock from the Date header of /version", async () => {
  await withApiServer(async ({ server, credentials }) => {
    const creds = await credentials();
    // A node clock that ticks a second per reading: asked at 1000, heard at 2000.
    let tick = 0;
    const now = () => (tick += 1_000);
    const skewMs = -3_600_000;
    server.setClockSkew(skewMs);
    const before = Date.now();
    const time = value(await askServerTime(creds, TIMEOUT_MS, now));
    const after = Date.now();
    assertEquals([time.sentMs, time.receivedMs, time.gitVersion], [1_000, 2_000, "v1.34.2"]);
    // HTTP dates have whole seconds.
    assertEquals(time.dateMs % 1_000, 0);
    assert(
      time.dateMs > before + skewMs - 1_000 && time.dateMs <= after + skewMs,
      `${time.dateMs}`,
    );
    assertEquals(server.requestCount("/version"), 1);

    // Anything but the API server's own answer has no clock to read.
    server.setFault("html");
    const html = failure(await askServerTime(creds, TIMEOUT_MS));
    assertEquals([html.source, html.kind], ["apiserver", "bad-response"]);
    await server.stopListening();
    assertEquals(failure(await askServerTime(creds, TIMEOUT_MS)).kind, "unreachable");
  });
});
