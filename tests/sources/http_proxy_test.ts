/**
 * The API server and kubelet clients through real proxies on loopback: HTTP CONNECT (plain and
 * over TLS), absolute-form requests, SOCKS5, with and without credentials; proxies that refuse
 * or hang; NO_PROXY, proxy-url, and loopback, which is never proxied.
 *
 * The simulated API server is asked by a name only the proxies resolve (apiserver.ckpt.test):
 * an answer means the request went through the proxy.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import * as v from "valibot";
import { object } from "../../lib/core/schema.ts";
import { createApiServerClient } from "../../lib/sources/apiserver.ts";
import { ChangeFanout } from "../../lib/sources/changes.ts";
import { getJson, type HttpTarget } from "../../lib/sources/http.ts";
import type { Credentials } from "../../lib/sources/kubeconfig.ts";
import { chooseProxy, type ProxyEnvironment } from "../../lib/sources/proxy.ts";
import type { SourceResult } from "../../lib/sources/types.ts";
import { SIM_API_SERVER_NAME, startSimApiServer } from "../../lib/sim/apiserver.ts";
import { startSimPeer } from "../../lib/sim/peer.ts";
import { pod } from "../helpers/pods.ts";
import { startHttpProxy, startSocksProxy, type TestProxy } from "../helpers/proxy_servers.ts";
import { until } from "../helpers/until.ts";
import { NODE_NAME, type SimCluster, simCluster, using } from "../sim/harness.ts";

const TIMEOUT_MS = 5_000;
const HOSTS = { [SIM_API_SERVER_NAME]: "127.0.0.1", "kubelet.ckpt.test": "127.0.0.1" };
/** Nothing listens on the discard port. */
const DEAD = "http://127.0.0.1:9";

function failure<T>(result: SourceResult<T>) {
  if (result.ok) throw new Error(`expected a failure, got ${JSON.stringify(result.value)}`);
  return result.failure;
}

function names<T extends { metadata: { name: string } }>(result: SourceResult<T[]>): string[] {
  if (!result.ok) throw new Error(`expected an answer, got: ${result.failure.message}`);
  return result.value.map((item) => item.metadata.name);
}

interface Fixture {
  cluster: SimCluster;
  port: number;
  /** The node's credentials for the API server at `host` (default: its proxied name). */
  creds(host?: string, extra?: Partial<Credentials>): Credentials;
  requests(): readonly { authenticatedAs?: string }[];
}

async function withApiServer(fn: (f: Fixture) => Promise<void>) {
  const cluster = await simCluster();
  await using(startSimApiServer(cluster.ca), async (server) => {
    server.setPods([{ ...pod("kube-system/kube-apiserver"), spec: { nodeName: NODE_NAME } }]);
    server.setSecret("kube-system", "certs", { "tls.key": "key" });
    await fn({
      cluster,
      port: server.port,
      creds: (host = SIM_API_SERVER_NAME, extra = {}) => ({
        server: `https://${host}:${server.port}`,
        insecure: false,
        caPem: cluster.ca.certPem,
        certPem: cluster.nodeClient.certPem,
        keyPem: cluster.nodeClient.keyPem,
        ...extra,
      }),
      requests: () => server.requests,
    });
  });
}

function list(creds: Credentials, env: ProxyEnvironment, timeoutMs = TIMEOUT_MS) {
  return createApiServerClient(creds, timeoutMs, env).listNodePods(NODE_NAME);
}

Deno.test("HTTPS_PROXY: the API server is asked through a CONNECT tunnel, with mTLS inside", async () => {
  await withApiServer(async (f) => {
    await using(startHttpProxy({ hosts: HOSTS }), async (proxy) => {
      const api = createApiServerClient(f.creds(), TIMEOUT_MS, { HTTPS_PROXY: proxy.url });
      assertEquals(names(await api.listNodePods(NODE_NAME)), ["kube-apiserver"]);
      const secret = await api.getSecret("kube-system", "certs");
      assertEquals(secret.ok && new TextDecoder().decode(secret.value["tls.key"]), "key");
      // One tunnel per call: calls through a proxy are not pooled.
      assertEquals(proxy.requests, [
        { method: "CONNECT", target: `${SIM_API_SERVER_NAME}:${f.port}` },
        { method: "CONNECT", target: `${SIM_API_SERVER_NAME}:${f.port}` },
      ]);
      assertEquals(f.requests().map((r) => r.authenticatedAs), [
        `cert:system:node:${NODE_NAME}`,
        `cert:system:node:${NODE_NAME}`,
      ]);
    });
    // Without the proxy the name resolves nowhere: the answers above came through it.
    const direct = failure(await list(f.creds(), {}));
    assertEquals(direct.kind, "unreachable");
    assert(!direct.message.includes("via proxy"), direct.message);
  });
});

Deno.test("lower-case https_proxy, a value without a scheme, and credentials in the URL", async () => {
  await withApiServer(async (f) => {
    const login = { user: "node", password: "p@ss:word" };
    await using(startHttpProxy({ hosts: HOSTS, login }), async (proxy) => {
      const hostPort = proxy.url.slice("http://".length);
      const withLogin = `node:${encodeURIComponent(login.password)}@${hostPort}`;
      assertEquals(names(await list(f.creds(), { https_proxy: withLogin })), ["kube-apiserver"]);
      assertEquals(proxy.requests[0].credentials, `Basic ${btoa("node:p@ss:word")}`);

      // Without them the proxy answers 407: the API server is unavailable, and the message
      // names the proxy, never the password.
      const refused = failure(await list(f.creds(), { HTTPS_PROXY: proxy.url }));
      assertEquals(refused.kind, "unreachable");
      assert(
        refused.message.includes(`via proxy ${proxy.url} (HTTPS_PROXY)`) &&
          refused.message.includes("407 Proxy Authentication Required"),
        refused.message,
      );
      const wrong = failure(
        await list(f.creds(), { HTTPS_PROXY: `http://node:nope@${hostPort}` }),
      );
      assert(wrong.message.includes("407") && !wrong.message.includes("nope"), wrong.message);
    });
  });
});

Deno.test("loopback is never proxied, even with NO_PROXY empty and a proxy-url", async () => {
  await withApiServer(async (f) => {
    await using(startHttpProxy({ hosts: HOSTS }), async (proxy) => {
      const env = { HTTPS_PROXY: proxy.url, HTTP_PROXY: proxy.url, NO_PROXY: "" };
      assertEquals(names(await list(f.creds("127.0.0.1"), env)), ["kube-apiserver"]);
      const proxyUrl = new URL(proxy.url);
      assertEquals(names(await list(f.creds("127.0.0.1", { proxyUrl }), {})), ["kube-apiserver"]);
      assertEquals(proxy.requests, []);
    });
  });
});

Deno.test("NO_PROXY is honoured: a listed name goes direct", async () => {
  await withApiServer(async (f) => {
    await using(startHttpProxy({ hosts: HOSTS }), async (proxy) => {
      for (const noProxy of [".ckpt.test", "ckpt.test", SIM_API_SERVER_NAME, "*"]) {
        for (const env of [{ NO_PROXY: noProxy }, { no_proxy: noProxy }]) {
          const direct = failure(await list(f.creds(), { HTTPS_PROXY: proxy.url, ...env }));
          // Direct, the name does not resolve.
          assertEquals([noProxy, direct.kind], [noProxy, "unreachable"]);
          assert(!direct.message.includes("via proxy"), direct.message);
        }
      }
      assertEquals(proxy.requests, []);
      const other = { HTTPS_PROXY: proxy.url, NO_PROXY: "10.0.0.0/8,example.com" };
      assertEquals(names(await list(f.creds(), other)), ["kube-apiserver"]);
      assertEquals(proxy.requests.length, 1);
    });
  });
});

Deno.test("proxy-url is used instead of the environment: SOCKS5, with and without a login", async () => {
  await withApiServer(async (f) => {
    const login = { user: "agent", password: "s3cret" };
    await using(startSocksProxy({ hosts: HOSTS, login }), async (socks) => {
      const hostPort = socks.url.slice("socks5://".length);
      const proxyUrl = new URL(`socks5://agent:s3cret@${hostPort}`);
      // The environment's dead proxy and its NO_PROXY are not read.
      const env = { HTTPS_PROXY: DEAD, NO_PROXY: "*" };
      assertEquals(names(await list(f.creds(undefined, { proxyUrl }), env)), ["kube-apiserver"]);
      assertEquals(socks.requests, [{
        method: "SOCKS",
        target: `${SIM_API_SERVER_NAME}:${f.port}`,
        credentials: "agent:s3cret",
      }]);
      const anonymous = new URL(socks.url);
      const refused = failure(await list(f.creds(undefined, { proxyUrl: anonymous }), {}));
      assertEquals(refused.kind, "unreachable");
      assert(refused.message.includes(`via proxy ${socks.url} (proxy-url)`), refused.message);
      assert(refused.message.includes("requires authentication"), refused.message);
    });
    await using(startSocksProxy({ hosts: HOSTS }), async (socks) => {
      for (const scheme of ["socks5", "socks5h"]) {
        const env = { HTTPS_PROXY: socks.url.replace("socks5", scheme) };
        assertEquals(names(await list(f.creds(), env)), ["kube-apiserver"]);
      }
      assertEquals(socks.requests.map((r) => r.credentials), [undefined, undefined]);
      socks.behave(2);
      const ruled = failure(await list(f.creds(), { HTTPS_PROXY: socks.url }));
      assert(ruled.message.includes("connection not allowed by ruleset"), ruled.message);
    });
  });
});

Deno.test("an https proxy: TLS to the proxy, then TLS to the API server inside it", async () => {
  await withApiServer(async (f) => {
    const serving = await f.cluster.ca.issueServerCert("proxy");
    await using(startHttpProxy({ hosts: HOSTS, tls: serving }), async (proxy) => {
      assert(proxy.url.startsWith("https://"));
      assertEquals(names(await list(f.creds(), { HTTPS_PROXY: proxy.url })), ["kube-apiserver"]);
      assertEquals(proxy.requests.map((r) => r.method), ["CONNECT"]);
      // The proxy's certificate is verified as the API server's is: against the cluster CA.
      const stranger = await simCluster();
      const untrusted = failure(
        await list(f.creds(undefined, { caPem: stranger.ca.certPem }), { HTTPS_PROXY: proxy.url }),
      );
      assertEquals(untrusted.kind, "unreachable");
      assert(untrusted.message.includes(`via proxy ${proxy.url}`), untrusted.message);
      assertEquals(proxy.requests.length, 1);
    });
  });
});

Deno.test("a proxy that refuses, is not there, or hangs: the API server is unavailable", async () => {
  await withApiServer(async (f) => {
    await using(startHttpProxy({ hosts: HOSTS }), async (proxy) => {
      for (const status of [403, 502, 503]) {
        proxy.behave(status);
        const refused = failure(await list(f.creds(), { HTTPS_PROXY: proxy.url }));
        assertEquals([status, refused.kind], [status, "unreachable"]);
        assert(refused.message.includes(`refused: ${status}`), refused.message);
      }
      proxy.behave("hang");
      const hung = failure(await list(f.creds(), { HTTPS_PROXY: proxy.url }, 300));
      assertEquals(hung.kind, "timeout");
      assert(
        hung.message.includes(`via proxy ${proxy.url} (HTTPS_PROXY): no complete answer within`),
        hung.message,
      );
    });
    await using(startSocksProxy({ hosts: HOSTS }), async (socks) => {
      socks.behave("hang");
      const hung = failure(await list(f.creds(), { HTTPS_PROXY: socks.url }, 300));
      assertEquals(hung.kind, "timeout");
    });
    const dead = failure(await list(f.creds(), { HTTPS_PROXY: DEAD }));
    assertEquals(dead.kind, "unreachable");
    assert(dead.message.includes(`via proxy ${DEAD} (HTTPS_PROXY)`), dead.message);
    assert(dead.message.includes("ECONNREFUSED"), dead.message);
  });
});

Deno.test("a proxy value that cannot be used is a configuration error naming the variable", async () => {
  await withApiServer(async (f) => {
    const bad = failure(await list(f.creds(), { https_proxy: "ftp://proxy.corp" }));
    assertEquals(bad.kind, "misconfigured");
    assert(
      bad.message.endsWith(
        'no proxy used: https_proxy: "ftp://proxy.corp": proxy scheme ftp: is not supported ' +
          "(http, https, socks5, socks5h)",
      ),
      bad.message,
    );
    assertEquals(f.requests(), []);
  });
});

const Pods = object({ kind: v.literal("PodList") });

Deno.test("http targets: absolute-form through an http(s) proxy, a tunnel through SOCKS5", async () => {
  const cluster = await simCluster();
  const serving = await cluster.ca.issueServerCert("proxy");
  await using(
    startSimPeer({
      handle: () => ({ status: 200, body: { kind: "PodList", items: [] } }),
      failure: () => ({ status: 500, body: "" }),
    }),
    async (readonly) => {
      const url = `http://kubelet.ckpt.test:${readonly.port}`;
      const get = (env: ProxyEnvironment) => {
        const target: HttpTarget = {
          source: "kubelet",
          baseUrl: url,
          timeoutMs: TIMEOUT_MS,
          proxy: chooseProxy(new URL(url), env),
        };
        return getJson(target, { path: "/pods", schema: Pods });
      };
      const proxies: [TestProxy, string][] = [
        [await startHttpProxy({ hosts: HOSTS, login: { user: "u", password: "p" } }), "GET"],
        [await startHttpProxy({ hosts: HOSTS, tls: serving }), "GET"],
        [await startSocksProxy({ hosts: HOSTS }), "SOCKS"],
      ];
      try {
        for (const [proxy, method] of proxies) {
          const withLogin = proxy.url.replace("://", "://u:p@");
          const answer = await get({ HTTP_PROXY: withLogin, HTTPS_PROXY: DEAD });
          // The https proxy's certificate is checked against the system's roots here (no CA).
          if (proxy.url.startsWith("https:")) {
            assertEquals(failure(answer).kind, "unreachable");
            continue;
          }
          assertEquals([proxy.url, answer.ok], [proxy.url, true]);
          assertEquals(
            proxy.requests.map((r) => r.method),
            [method],
          );
          const target = method === "GET" ? `${url}/pods` : `kubelet.ckpt.test:${readonly.port}`;
          assertEquals(proxy.requests[0].target, target);
        }
        assertEquals(proxies[0][0].requests[0].credentials, `Basic ${btoa("u:p")}`);
        // The request reached the peer in origin form.
        assertEquals(readonly.requests.map((r) => r.target), ["/pods", "/pods"]);
      } finally {
        for (const [proxy] of proxies) await proxy.close();
      }
    },
  );
});

Deno.test("HTTPS_PROXY: the API server is watched through CONNECT tunnels too, and NO_PROXY keeps it direct", async () => {
  const cluster = await simCluster();
  await using(startSimApiServer(cluster.ca), async (server) => {
    await using(startHttpProxy({ hosts: HOSTS }), async (proxy) => {
      const creds: Credentials = {
        server: `https://${SIM_API_SERVER_NAME}:${server.port}`,
        insecure: false,
        caPem: cluster.ca.certPem,
        certPem: cluster.nodeClient.certPem,
        keyPem: cluster.nodeClient.keyPem,
      };
      const told: string[] = [];
      const changes = new ChangeFanout();
      changes.subscribe((reason) => told.push(reason));
      const api = createApiServerClient(creds, TIMEOUT_MS, { HTTPS_PROXY: proxy.url }, {
        nodeName: NODE_NAME,
        changes,
        resyncMs: 600_000,
      });
      try {
        await until("the pods are watched", () => server.watchesOpen() === 1);
        server.setPods([{ ...pod("kube-system/etcd"), spec: { nodeName: NODE_NAME } }]);
        await until("the event arrives", () => told.includes("pod changed"));
        assertEquals(api.watchedNodePods?.(NODE_NAME)?.map((p) => p.metadata.name), ["etcd"]);
        // The list, then the watch: each through its own tunnel.
        assertEquals(proxy.requests.map((r) => r.method), ["CONNECT", "CONNECT"]);
      } finally {
        api.close?.();
      }
      // The name in NO_PROXY: the proxy is not used, and the name does not resolve.
      const direct = createApiServerClient(creds, TIMEOUT_MS, {
        HTTPS_PROXY: proxy.url,
        NO_PROXY: SIM_API_SERVER_NAME,
      }, { nodeName: NODE_NAME, changes, resyncMs: 600_000 });
      try {
        await until("the API server is lost", () => told.includes("apiserver lost"));
        assertEquals(proxy.requests.length, 2);
      } finally {
        direct.close?.();
      }
    });
  });
});
