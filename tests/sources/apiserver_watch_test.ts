/**
 * The API server client's watches against the simulated API server, over real mTLS: the node's
 * pods and single secrets and configmaps, listed then watched; resumed, relisted, broken, refused,
 * and served from memory only while in sync.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import type { Pod } from "../../lib/core/pod.ts";
import {
  type ApiServerClient,
  createApiServerClient,
  type WatchSettings,
} from "../../lib/sources/apiserver.ts";
import { API_LOST, ChangeFanout } from "../../lib/sources/changes.ts";
import { loadKubeconfig } from "../../lib/sources/kubeconfig.ts";
import {
  type SimApiServer,
  type SimApiServerOptions,
  startSimApiServer,
} from "../../lib/sim/apiserver.ts";
import { writeKubeconfig } from "../../lib/sim/pki.ts";
import { DEAD_PROXY } from "../helpers/proxy_env.ts";
import { pod } from "../helpers/pods.ts";
import { NODE_NAME, simCluster, withTempDir } from "../sim/harness.ts";
import { until } from "../helpers/until.ts";
import { value } from "../helpers/source_result.ts";

function onNode(id: string, nodeName = NODE_NAME, image = "pause:3.10"): Pod {
  const p = pod(id);
  return { ...p, spec: { containers: [{ name: "main", image }], nodeName } };
}

interface Fixture {
  server: SimApiServer;
  client: ApiServerClient;
  /** Every change the client told, in order. */
  told: string[];
  /** What the pods' cache answered each time the client told the API server lost. */
  cacheAtLoss: (Pod[] | undefined)[];
  /** The watch requests of the node's pods so far, as sent. */
  podWatches(): URLSearchParams[];
}

const text = new TextEncoder();

/**
 * How watches reach the server: over fetch, HTTP/2 to a server that speaks it and HTTP/1.1 to
 * one that does not; over node:https (one connection each) where fetch cannot do what the
 * kubeconfig asks (here: insecure-skip-tls-verify).
 */
const TRANSPORTS = ["h2", "fetch-h1", "node-h1"] as const;
type Transport = typeof TRANSPORTS[number];

async function withWatchingClient(
  transport: Transport,
  fn: (f: Fixture) => Promise<void>,
  options: {
    server?: SimApiServerOptions;
    watch?: Partial<WatchSettings>;
    /** The API server's timeout (apiTimeout): the headers of a watch, a whole list. */
    timeoutMs?: number;
  } = {},
): Promise<void> {
  const cluster = await simCluster();
  const server = await startSimApiServer(cluster.ca, {
    ...options.server,
    http2: transport === "h2",
  });
  try {
    await withTempDir(async (dir) => {
      const path = await writeKubeconfig(dir, {
        server: server.url,
        client: cluster.nodeClient,
        embed: "inline",
        ...(transport === "node-h1" ? { insecure: true } : { caPem: cluster.ca.certPem }),
      });
      const loaded = loadKubeconfig(path);
      if (!loaded.ok) throw new Error(loaded.error);
      const changes = new ChangeFanout();
      const told: string[] = [];
      const cacheAtLoss: (Pod[] | undefined)[] = [];
      // Asked as the loss is told: a watch resumed at once may open again a moment later, and
      // its cache answer until it fails in turn.
      const made: { client?: ApiServerClient } = {};
      changes.subscribe((reason) => {
        told.push(reason);
        if (reason === API_LOST) cacheAtLoss.push(made.client?.watchedNodePods?.(NODE_NAME));
      });
      // The node's environment: proxies that answer nothing, loopback exempted.
      const env = { HTTPS_PROXY: DEAD_PROXY, HTTP_PROXY: DEAD_PROXY, NO_PROXY: "" };
      const client = made.client = createApiServerClient(
        loaded.credentials,
        options.timeoutMs ?? 5_000,
        env,
        {
          nodeName: NODE_NAME,
          changes,
          resyncMs: 600_000,
          ...options.watch,
        },
      );
      const podWatches = () =>
        server.requests.map((r) => new URL(r.target, "http://sim"))
          .filter((url) => url.pathname === "/api/v1/pods" && url.searchParams.has("watch"))
          .map((url) => url.searchParams);
      try {
        await fn({ server, client, told, cacheAtLoss, podWatches });
      } finally {
        client.close?.();
      }
    });
  } finally {
    await server.close();
  }
}

const names = (pods: Pod[] | undefined) => pods?.map((p) => p.metadata.name);

/** The watch requests of secrets and configmaps so far, as sent. */
function objectWatches(server: SimApiServer): URLSearchParams[] {
  return server.requests.map((r) => new URL(r.target, "http://sim"))
    .filter((url) => url.pathname !== "/api/v1/pods" && url.searchParams.has("watch"))
    .map((url) => url.searchParams);
}

for (const transport of TRANSPORTS) {
  Deno.test(`the node's pods are listed, then watched: changes reach the cache, which equals a fresh list (${transport})`, async () => {
    await withWatchingClient(transport, async ({ server, client, told, podWatches }) => {
      await until("the watch is open", () => client.watchedNodePods?.(NODE_NAME) !== undefined);
      assertEquals(client.watchedNodePods?.(NODE_NAME), []);
      const [watch] = podWatches();
      assertEquals(watch.get("fieldSelector"), `spec.nodeName=${NODE_NAME}`);
      assertEquals(watch.get("allowWatchBookmarks"), "true");
      const timeout = Number(watch.get("timeoutSeconds"));
      assert(timeout >= 300 && timeout < 600, `timeoutSeconds ${timeout}`);

      server.setPods([onNode("kube-system/etcd"), onNode("default/web", "node-2")]);
      await until(
        "the pod arrives",
        () => names(client.watchedNodePods?.(NODE_NAME))?.length === 1,
      );
      assertEquals(
        client.watchedNodePods?.(NODE_NAME),
        value(await client.listNodePods(NODE_NAME)),
      );
      assert(told.includes("pod changed"));

      server.setPods([onNode("kube-system/etcd", NODE_NAME, "etcd:3.6"), onNode("default/web")]);
      await until(
        "both changes arrive",
        () =>
          names(client.watchedNodePods?.(NODE_NAME))?.length === 2 &&
          String(JSON.stringify(client.watchedNodePods?.(NODE_NAME))).includes("etcd:3.6"),
      );
      assertEquals(
        client.watchedNodePods?.(NODE_NAME),
        value(await client.listNodePods(NODE_NAME)),
      );

      // Moved to another node: gone from this node's watch, as from its list.
      server.setPods([onNode("kube-system/etcd", "node-2"), onNode("default/web")]);
      await until("the pod leaves", () => names(client.watchedNodePods?.(NODE_NAME))?.length === 1);
      assertEquals(names(client.watchedNodePods?.(NODE_NAME)), ["web"]);
      assertEquals(client.watchedNodePods?.("another-node"), undefined);
      assertEquals(server.requestsByVerb().watch, 1);
    });
  });

  Deno.test(`a watch the server ends is resumed at once from the last version, without a list (${transport})`, async () => {
    await withWatchingClient(transport, async ({ server, client, podWatches }) => {
      server.setPods([onNode("kube-system/etcd")]);
      await until("the watch is open", () => server.watchesOpen() === 1);
      server.setPods([onNode("kube-system/etcd", NODE_NAME, "etcd:3.6")]);
      await until(
        "the change arrives",
        () => String(JSON.stringify(client.watchedNodePods?.(NODE_NAME))).includes("etcd:3.6"),
      );
      const last = String(server.revision());
      const lists = server.requestsByVerb().list;

      server.closeWatches("end");
      await until("a second watch", () => podWatches().length === 2);
      assertEquals(podWatches()[1].get("resourceVersion"), last);
      assertEquals(server.requestsByVerb().list, lists);
      assert(client.watchedNodePods?.(NODE_NAME) !== undefined);
    });
  });

  Deno.test(`bookmarks advance the version a watch resumes from (${transport})`, async () => {
    await withWatchingClient(transport, async ({ server, podWatches }) => {
      server.setPods([onNode("kube-system/etcd")]);
      await until("the watch is open", () => server.watchesOpen() === 1);
      const seen = podWatches()[0].get("resourceVersion");
      // A change this node's watch does not see; the bookmark that ends the watch says it.
      server.setPods([onNode("kube-system/etcd"), onNode("default/web", "node-2")]);
      const revision = String(server.revision());
      assert(seen !== revision);
      server.closeWatches("end");
      await until("a second watch", () => podWatches().length === 2);
      assertEquals(podWatches()[1].get("resourceVersion"), revision);
    });
  });

  Deno.test(`a watch from a compacted version gets 410 Expired: the pods are listed again (${transport})`, async () => {
    await withWatchingClient(transport, async ({ server, client, podWatches }) => {
      server.setPods([onNode("kube-system/etcd")]);
      await until("the watch is open", () => server.watchesOpen() === 1);
      server.setPods([onNode("kube-system/etcd"), onNode("default/web", "node-2")]);
      server.compact();
      const lists = server.requestsByVerb().list;
      // Dropped: no last bookmark tells the client the revision it missed.
      server.closeWatches("drop");
      await until("listed again", () => server.requestsByVerb().list === lists + 1);
      await until("watched from the new list", () => podWatches().length === 3);
      assertEquals(podWatches()[2].get("resourceVersion"), String(server.revision()));
      await until("in sync", () => client.watchedNodePods?.(NODE_NAME) !== undefined);
      assertEquals(names(client.watchedNodePods?.(NODE_NAME)), ["etcd"]);
    });
  });

  Deno.test(`a watch silent past its timeout and margin is broken: the API server is lost, and every watch asked again (${transport})`, async () => {
    await withWatchingClient(transport, async ({ server, client, told }) => {
      const secret = { kind: "secret", namespace: "kube-system", name: "etcd-certs" } as const;
      client.watchObjects?.([secret]);
      await until("the watches are open", () => server.watchesOpen() === 2);
      const objectWatches = () =>
        server.requests.filter((r) => r.target.includes("secrets?") && r.target.includes("watch"))
          .length;
      server.setWatchMode("silent");
      // Only the pods' watch ends: the secret's (asked for an hour or more) stays open.
      server.closeWatches("end", "pods");
      assertEquals(objectWatches(), 1);
      await until("the pods' watch again", () => server.watchesOpen() === 2);
      await until("the API server is lost", () => told.includes("apiserver lost"));
      // A silent watch is asked again, opens (the cache answers) and falls silent once more: the
      // cache stops answering each time, not for good.
      await until(
        "the cache stops answering",
        () => client.watchedNodePods?.(NODE_NAME) === undefined,
      );
      // The silence may be a dead connection: the other watches are asked again too.
      await until("the secret's watch again", () => objectWatches() >= 2);

      server.setWatchMode("normal");
      // A silent watch's headers already told "back" before it went silent: what counts is a
      // "back" after this point, with the cache in sync.
      const before = told.length;
      server.closeWatches("end");
      await until("the API server is back", () => told.slice(before).includes("apiserver back"));
      await until("in sync again", () => client.watchedNodePods?.(NODE_NAME) !== undefined);
    }, { watch: { podWatchSeconds: [1, 1], silenceMarginMs: 100 } });
  });

  for (const fault of ["html", "truncated", "wrong-kind", "server-error", "hang"] as const) {
    Deno.test(`a watch answered ${fault} breaks it: the API server is lost, never "no pods" (${transport})`, async () => {
      await withWatchingClient(transport, async ({ server, client, cacheAtLoss }) => {
        server.setPods([onNode("kube-system/etcd")]);
        await until("in sync", () => names(client.watchedNodePods?.(NODE_NAME))?.length === 1);
        server.setFault(fault);
        server.closeWatches("end");
        await until("the API server is lost", () => cacheAtLoss.length > 0);
        assertEquals(cacheAtLoss[0], undefined);
        // A watch resumed at once may have opened since (its headers tell "back" until the
        // fault ends it): its cache holds the pods it held, never none.
        const now = client.watchedNodePods?.(NODE_NAME);
        assert(now === undefined || names(now)?.join() === "etcd", `cache: ${names(now)}`);
        assert(!(await client.listNodePods(NODE_NAME)).ok);
      }, { timeoutMs: 500 });
    });
  }

  Deno.test(`a dropped connection with the port closed loses the API server at once (${transport})`, async () => {
    await withWatchingClient(transport, async ({ server, client, told }) => {
      await until("in sync", () => client.watchedNodePods?.(NODE_NAME) !== undefined);
      await server.stopListening();
      await until("the API server is lost", () => told.includes("apiserver lost"));
      assertEquals(client.watchedNodePods?.(NODE_NAME), undefined);
      await server.resumeListening();
      await until("the API server is back", () => told.includes("apiserver back"));
    });
  });

  Deno.test(`a watch cut short loses the API server before it is resumed, and is back once resumed (${transport})`, async () => {
    await withWatchingClient(transport, async ({ server, client, told, podWatches }) => {
      server.setPods([onNode("kube-system/etcd")]);
      await until("in sync", () => names(client.watchedNodePods?.(NODE_NAME))?.length === 1);
      const lists = server.requestsByVerb().list;
      // The server answers on: the resume succeeds, and the pass the loss asked for finds it.
      server.closeWatches("drop", "pods");
      await until("the API server is back", () => told.includes("apiserver back"));
      assertEquals(told.filter((t) => t.startsWith("apiserver")), [
        "apiserver lost",
        "apiserver back",
      ]);
      assertEquals(podWatches().length, 2);
      assertEquals(server.requestsByVerb().list, lists, "resumed, not listed again");
      assertEquals(names(client.watchedNodePods?.(NODE_NAME)), ["etcd"]);
    });
  });

  Deno.test(`a quiet watch that stayed open a while and is cut short is resumed as after a first failure, without a list (${transport})`, async () => {
    await withWatchingClient(transport, async ({ server, podWatches }) => {
      const open = (watches: number) =>
        podWatches().length === watches && server.watchesOpen() === 1;
      await until("in sync", () => open(1));
      const lists = server.requestsByVerb().list;
      server.closeWatches("drop", "pods");
      await until("resumed", () => open(2));
      // Longer than the pods' watch must stay open to have worked (apiserver.ts, workedAfterMs).
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      server.closeWatches("drop", "pods");
      await until("resumed again", () => open(3));
      assertEquals(server.requestsByVerb().list, lists, "no failure was one more of a series");
    });
  });

  for (const mode of ["forbidden", "method-not-allowed"] as const) {
    Deno.test(`watches refused (${mode}): pods and objects are asked with plain GETs, and watched again later (${transport})`, async () => {
      await withWatchingClient(transport, async ({ server, client }) => {
        server.setWatchMode(mode);
        server.setPods([onNode("kube-system/etcd")]);
        server.setSecret("kube-system", "etcd-certs", { "tls.crt": "cert" });
        const ref = { kind: "secret", namespace: "kube-system", name: "etcd-certs" } as const;
        client.watchObjects?.([ref]);
        await until("both watches asked", () => server.requestsByVerb().watch >= 2);
        assertEquals(client.watchedNodePods?.(NODE_NAME), undefined);
        assertEquals(names(value(await client.listNodePods(NODE_NAME))), ["etcd"]);
        const gets = server.requestsByVerb().get;
        assertEquals(value(await client.getSecret("kube-system", "etcd-certs")), {
          "tls.crt": text.encode("cert"),
        });
        assertEquals(server.requestsByVerb().get, gets + 1);
        assertEquals(client.objectVersion?.(ref), undefined);

        // Asked again later: once the server allows watches, they are used.
        server.setWatchMode("normal");
        await until("the pods watched", () => client.watchedNodePods?.(NODE_NAME) !== undefined);
        await until("the secret watched", () => client.objectVersion?.(ref) !== undefined);
      }, { watch: { retryRefusedMs: 200 } });
    });
  }

  Deno.test(`a watched secret is served without a request, its changes told; unreferenced watches are closed (${transport})`, async () => {
    await withWatchingClient(transport, async ({ server, client, told }) => {
      server.setSecret("kube-system", "etcd-certs", { "tls.crt": "one" });
      server.setConfigMap("kube-system", "kube-proxy", { "config.conf": "mode: ipvs" });
      const secret = { kind: "secret", namespace: "kube-system", name: "etcd-certs" } as const;
      const configMap = {
        kind: "configMap",
        namespace: "kube-system",
        name: "kube-proxy",
      } as const;
      const missing = { kind: "secret", namespace: "kube-system", name: "nothing" } as const;
      client.watchObjects?.([secret, configMap, missing]);
      await until("all watched", () => server.watchesOpen() === 4);
      // Every watch in sync, not only the last asked: their connections come in any order.
      await until("in sync", () =>
        client.objectVersion?.(missing) === "absent" &&
        client.objectVersion?.(secret) !== undefined &&
        client.objectVersion?.(configMap) !== undefined);
      // One watch for each secret, in whichever order their connections brought them.
      const secretWatches = server.requests.map((r) => r.target)
        .filter((t) => t.includes("secrets?") && t.includes("watch"))
        .map((t) => new URLSearchParams(t.split("?")[1]));
      assertEquals(secretWatches.map((w) => w.get("fieldSelector")).sort(), [
        "metadata.name=etcd-certs",
        "metadata.name=nothing",
      ]);
      for (const watch of secretWatches) {
        const timeout = Number(watch.get("timeoutSeconds"));
        assert(timeout >= 3600 && timeout < 7200, `timeoutSeconds ${timeout}`);
      }

      const before = server.requestsByVerb();
      assertEquals(value(await client.getSecret("kube-system", "etcd-certs")), {
        "tls.crt": text.encode("one"),
      });
      assertEquals(value(await client.getConfigMap("kube-system", "kube-proxy")), {
        "config.conf": text.encode("mode: ipvs"),
      });
      const absent = await client.getSecret("kube-system", "nothing");
      assert(!absent.ok && absent.failure.kind === "not-found");
      assertEquals(server.requestsByVerb(), before);

      const version = client.objectVersion?.(secret);
      server.setSecret("kube-system", "etcd-certs", { "tls.crt": "two" });
      await until("the change arrives", () => client.objectVersion?.(secret) !== version);
      assert(told.includes("secret changed"));
      assertEquals(value(await client.getSecret("kube-system", "etcd-certs")), {
        "tls.crt": text.encode("two"),
      });
      server.deleteSecret("kube-system", "etcd-certs");
      await until("the deletion arrives", () => client.objectVersion?.(secret) === "absent");

      client.watchObjects?.([configMap]);
      await until("the others' watches closed", () => server.watchesOpen() === 2);
      assertEquals(client.objectVersion?.(secret), undefined);
    });
  });

  Deno.test(`a secret fetched with a GET is watched from that answer, without a list (${transport})`, async () => {
    await withWatchingClient(transport, async ({ server, client, told }) => {
      await until("the pods in sync", () => client.watchedNodePods?.(NODE_NAME) !== undefined);
      server.setSecret("kube-system", "etcd-certs", { "tls.crt": "one" });
      const secret = { kind: "secret", namespace: "kube-system", name: "etcd-certs" } as const;
      assertEquals(value(await client.getSecret("kube-system", "etcd-certs")), {
        "tls.crt": text.encode("one"),
      });
      const fetchedAt = String(server.revision());
      const before = server.requestsByVerb();
      client.watchObjects?.([secret]);
      await until("in sync", () => client.objectVersion?.(secret) === fetchedAt);
      assertEquals(server.requestsByVerb(), { ...before, watch: before.watch + 1 });
      assertEquals(objectWatches(server)[0].get("resourceVersion"), fetchedAt);
      const gets = server.requestsByVerb().get;
      assertEquals(value(await client.getSecret("kube-system", "etcd-certs")), {
        "tls.crt": text.encode("one"),
      });
      assertEquals(server.requestsByVerb().get, gets);

      server.setSecret("kube-system", "etcd-certs", { "tls.crt": "two" });
      await until("the change arrives", () => client.objectVersion?.(secret) !== fetchedAt);
      assert(told.includes("secret changed"));
      assertEquals(value(await client.getSecret("kube-system", "etcd-certs")), {
        "tls.crt": text.encode("two"),
      });
    });
  });

  Deno.test(`an object watched from its GET starts at the pods' version when that is later (${transport})`, async () => {
    await withWatchingClient(transport, async ({ server, client }) => {
      server.setConfigMap("kube-system", "kube-proxy", { "config.conf": "mode: ipvs" });
      const configMap = {
        kind: "configMap",
        namespace: "kube-system",
        name: "kube-proxy",
      } as const;
      const objectVersion = String(server.revision());
      server.setPods([onNode("kube-system/etcd")]);
      await until("the pod arrives", () => client.watchedNodePods?.(NODE_NAME)?.length === 1);
      const podsVersion = String(server.revision());
      assert(Number(podsVersion) > Number(objectVersion));
      await client.getConfigMap("kube-system", "kube-proxy");
      client.watchObjects?.([configMap]);
      await until("in sync", () => client.objectVersion?.(configMap) === objectVersion);
      assertEquals(objectWatches(server)[0].get("resourceVersion"), podsVersion);
      assertEquals(server.requestsByVerb().list, 1, "the pods' list only");
    });
  });

  Deno.test(`changed or deleted between its GET and its watch: the watch delivers it (${transport})`, async () => {
    await withWatchingClient(transport, async ({ server, client }) => {
      await until("the pods in sync", () => client.watchedNodePods?.(NODE_NAME) !== undefined);
      server.setSecret("kube-system", "changed", { key: "one" });
      server.setSecret("kube-system", "deleted", { key: "one" });
      const changed = { kind: "secret", namespace: "kube-system", name: "changed" } as const;
      const deleted = { kind: "secret", namespace: "kube-system", name: "deleted" } as const;
      await client.getSecret("kube-system", "changed");
      await client.getSecret("kube-system", "deleted");
      server.setSecret("kube-system", "changed", { key: "two" });
      server.deleteSecret("kube-system", "deleted");
      client.watchObjects?.([changed, deleted]);
      await until(
        "the change arrives",
        () => client.objectVersion?.(changed) === String(server.revision() - 1),
      );
      await until("the deletion arrives", () => client.objectVersion?.(deleted) === "absent");
      assertEquals(value(await client.getSecret("kube-system", "changed")), {
        key: text.encode("two"),
      });
      assertEquals(server.requestsByVerb().list, 1, "the pods' list only");
    });
  });

  Deno.test(`absent at its GET: watched from the pods' version, and its creation arrives (${transport})`, async () => {
    await withWatchingClient(transport, async ({ server, client }) => {
      await until("the pods in sync", () => client.watchedNodePods?.(NODE_NAME) !== undefined);
      const missing = { kind: "secret", namespace: "kube-system", name: "later" } as const;
      const absent = await client.getSecret("kube-system", "later");
      assert(!absent.ok && absent.failure.kind === "not-found");
      client.watchObjects?.([missing]);
      await until("in sync", () => client.objectVersion?.(missing) === "absent");
      assertEquals(server.requestsByVerb().list, 1, "the pods' list only");
      server.setSecret("kube-system", "later", { key: "here" });
      await until("the creation arrives", () => client.objectVersion?.(missing) !== "absent");
      assertEquals(value(await client.getSecret("kube-system", "later")), {
        key: text.encode("here"),
      });
    });
  });

  Deno.test(`an object's GET version the server no longer keeps (410): listed, then watched (${transport})`, async () => {
    await withWatchingClient(transport, async ({ server, client }) => {
      await until("the pods in sync", () => client.watchedNodePods?.(NODE_NAME) !== undefined);
      server.setSecret("kube-system", "etcd-certs", { "tls.crt": "one" });
      const secret = { kind: "secret", namespace: "kube-system", name: "etcd-certs" } as const;
      await client.getSecret("kube-system", "etcd-certs");
      server.setSecret("kube-system", "etcd-certs", { "tls.crt": "two" });
      server.compact();
      client.watchObjects?.([secret]);
      await until("listed", () => server.requestsByVerb().list === 2);
      await until("in sync", () => client.objectVersion?.(secret) === String(server.revision()));
      assertEquals(value(await client.getSecret("kube-system", "etcd-certs")), {
        "tls.crt": text.encode("two"),
      });
      assertEquals(objectWatches(server).length, 2);
    });
  });

  Deno.test(`an object's watch from its GET refused (403): plain GETs meanwhile (${transport})`, async () => {
    await withWatchingClient(transport, async ({ server, client }) => {
      await until("the pods in sync", () => client.watchedNodePods?.(NODE_NAME) !== undefined);
      server.setSecret("kube-system", "etcd-certs", { "tls.crt": "one" });
      const secret = { kind: "secret", namespace: "kube-system", name: "etcd-certs" } as const;
      await client.getSecret("kube-system", "etcd-certs");
      server.setWatchMode("forbidden");
      client.watchObjects?.([secret]);
      await until("its watch asked", () => objectWatches(server).length === 1);
      // The refusal takes the object out of sync: it is asked for, never served from memory.
      await until("not in sync", () => client.objectVersion?.(secret) === undefined);
      server.setSecret("kube-system", "etcd-certs", { "tls.crt": "two" });
      const gets = server.requestsByVerb().get;
      assertEquals(value(await client.getSecret("kube-system", "etcd-certs")), {
        "tls.crt": text.encode("two"),
      });
      assertEquals(server.requestsByVerb().get, gets + 1);
    }, { watch: { retryRefusedMs: 600_000 } });
  });

  Deno.test(`while the pods' watch says the API server is lost, the objects' watches wait for its return, then resume without a list (${transport})`, async () => {
    await withWatchingClient(transport, async ({ server, client, told }) => {
      const refs = Array.from({ length: 5 }, (_, i) => {
        server.setSecret("kube-system", `secret-${i}`, { key: `value-${i}` });
        return { kind: "secret", namespace: "kube-system", name: `secret-${i}` } as const;
      });
      client.watchObjects?.(refs);
      await until("every watch open", () => server.watchesOpen() === 6);
      await until("in sync", () => refs.every((ref) => client.objectVersion?.(ref) !== undefined));
      const objectRequests = () =>
        server.requests.filter((r) => r.target.includes("/secrets?")).length;
      const objectLists = () =>
        server.requests.filter((r) => r.target.includes("/secrets?") && !r.target.includes("watch"))
          .length;
      const listsBefore = objectLists();
      const requestsBefore = objectRequests();
      server.setFault("server-error");
      server.closeWatches("drop");
      await until("the API server is lost", () => told.includes("apiserver lost"));
      // Long enough for each object's own back-off to have tried several times.
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      assert(
        objectRequests() - requestsBefore <= refs.length,
        `${objectRequests() - requestsBefore} object requests while lost`,
      );
      server.setFault("none");
      await until("the API server is back", () => told.includes("apiserver back"));
      await until("every watch open again", () => server.watchesOpen() === 6);
      await until("in sync", () => refs.every((ref) => client.objectVersion?.(ref) !== undefined));
      assertEquals(objectLists(), listsBefore);
    });
  });

  Deno.test(`quiet objects' watches resume without a list after every outage the pods' watch told, not only the first (${transport})`, async () => {
    await withWatchingClient(transport, async ({ server, client, told }) => {
      const refs = Array.from({ length: 3 }, (_, i) => {
        server.setSecret("kube-system", `secret-${i}`, { key: `value-${i}` });
        return { kind: "secret", namespace: "kube-system", name: `secret-${i}` } as const;
      });
      client.watchObjects?.(refs);
      await until("in sync", () => refs.every((ref) => client.objectVersion?.(ref) !== undefined));
      const objectLists = () =>
        server.requests.filter((r) => r.target.includes("/secrets?") && !r.target.includes("watch"))
          .length;
      const listsBefore = objectLists();
      // No event reaches the objects' watches between the outages: each failure of theirs would
      // otherwise be one more of a series.
      for (let outage = 1; outage <= 3; outage++) {
        server.setFault("server-error");
        server.closeWatches("drop");
        await until(
          `lost ${outage}`,
          () => told.filter((t) => t === "apiserver lost").length === outage,
        );
        server.setFault("none");
        await until(
          `back ${outage}`,
          () => told.filter((t) => t === "apiserver back").length === outage,
        );
        await until(`every watch open again ${outage}`, () => server.watchesOpen() === 4);
        await until(
          `in sync ${outage}`,
          () => refs.every((ref) => client.objectVersion?.(ref) !== undefined),
        );
      }
      assertEquals(objectLists(), listsBefore);
    });
  });

  Deno.test(`object watches asked at once are asked 64 at a time until answered (${transport})`, async () => {
    await withWatchingClient(transport, async ({ server, client }) => {
      await until("the pods in sync", () => client.watchedNodePods?.(NODE_NAME) !== undefined);
      const refs = Array.from({ length: 100 }, (_, i) => {
        server.setSecret("kube-system", `secret-${i}`, { key: `value-${i}` });
        return { kind: "secret", namespace: "kube-system", name: `secret-${i}` } as const;
      });
      // Fetched first, so that each is watched from its GET, without a list.
      for (const ref of refs) await client.getSecret(ref.namespace, ref.name);
      // No answer at all: none of them is answered, so no more than 64 are ever asked.
      server.setFault("hang");
      client.watchObjects?.(refs);
      const asked = () => server.requests.filter((r) => r.target.includes("/secrets?")).length;
      await until("64 asked", () => asked() >= 64);
      await new Promise((resolve) => setTimeout(resolve, 500));
      assertEquals(asked(), 64);
    });
  });

  Deno.test(`connections: one for every watch over HTTP/2, one per watch over HTTP/1.1 (${transport})`, async () => {
    await withWatchingClient(transport, async ({ server, client }) => {
      const refs = Array.from({ length: 5 }, (_, i) => {
        server.setSecret("kube-system", `secret-${i}`, { key: `value-${i}` });
        return { kind: "secret", namespace: "kube-system", name: `secret-${i}` } as const;
      });
      client.watchObjects?.(refs);
      await until("every watch open", () => server.watchesOpen() === 6);
      // The lists' connections close once idle; the watches' stay.
      await until(
        "only the watches' connections open",
        () => server.connections().open === (transport === "h2" ? 1 : 6),
      );
    });
  });

  if (transport === "h2") {
    Deno.test("HTTP/2: watches past a connection's share go over another connection (h2)", async () => {
      await withWatchingClient(transport, async ({ server, client }) => {
        // The pods' watch and 150 objects': more streams than one connection is given.
        const refs = Array.from({ length: 150 }, (_, i) => {
          server.setSecret("kube-system", `secret-${i}`, { key: `value-${i}` });
          return { kind: "secret", namespace: "kube-system", name: `secret-${i}` } as const;
        });
        client.watchObjects?.(refs);
        await until("every watch open", () => server.watchesOpen() === 151);
        await until("two connections carry them", () => server.connections().open === 2);
        // The objects no longer needed end their watches, and the connection left empty closes.
        client.watchObjects?.(refs.slice(0, 10));
        await until("the others' watches closed", () => server.watchesOpen() === 11);
        await until("one connection left", () => server.connections().open === 1);
      });
    });
  }

  Deno.test(`every resync interval the pods are listed again; the cache answers throughout (${transport})`, async () => {
    await withWatchingClient(transport, async ({ server, client }) => {
      await until("in sync", () => client.watchedNodePods?.(NODE_NAME) !== undefined);
      const lists = server.requestsByVerb().list;
      await until("listed again, twice", () => server.requestsByVerb().list >= lists + 2);
      // A resync is no outage: the cache answers throughout.
      assert(client.watchedNodePods?.(NODE_NAME) !== undefined);
    }, { watch: { resyncMs: 100 } });
  });

  Deno.test(`a pod nested 100,000 levels deep is listed again and again, and the cache answers (${transport})`, async () => {
    // Numeric keys put V8's JSON.stringify on its recursive path, which fails far above this.
    let nested: unknown = "bottom";
    for (let i = 0; i < 100_000; i++) nested = { "1": nested };
    const deep = onNode("kube-system/deep");
    await withWatchingClient(transport, async ({ server, client }) => {
      server.setPods([{ ...deep, spec: { ...deep.spec, overhead: nested } }]);
      await until("in sync", () => client.watchedNodePods?.(NODE_NAME) !== undefined);
      const lists = server.requestsByVerb().list;
      await until("listed again, twice", () => server.requestsByVerb().list >= lists + 2);
      assertEquals(names(client.watchedNodePods?.(NODE_NAME)), ["deep"]);
    }, { watch: { resyncMs: 100 } });
  });

  Deno.test(`watches ended at once with nothing in them are failures, not a loop (${transport})`, async () => {
    await withWatchingClient(transport, async ({ server, client, told }) => {
      await until("in sync", () => client.watchedNodePods?.(NODE_NAME) !== undefined);
      server.setWatchMode("end-at-once");
      server.closeWatches("drop");
      await until("the API server is lost", () => told.includes("apiserver lost"));
      assertEquals(client.watchedNodePods?.(NODE_NAME), undefined);
      server.setWatchMode("normal");
      await until("the API server is back", () => told.includes("apiserver back"));
    });
  });

  Deno.test(`a watch answered 410 Gone lists again, as the ERROR event does (${transport})`, async () => {
    await withWatchingClient(transport, async ({ server, client }) => {
      await until("in sync", () => client.watchedNodePods?.(NODE_NAME) !== undefined);
      const lists = server.requestsByVerb().list;
      server.setWatchMode("gone");
      server.closeWatches("drop");
      await until("listed again", () => server.requestsByVerb().list > lists);
      server.setWatchMode("normal");
      await until("in sync again", () => server.watchesOpen() === 1);
      await until("served", () => client.watchedNodePods?.(NODE_NAME) !== undefined);
    });
  });

  Deno.test(`an event many reads long arrives whole (${transport})`, async () => {
    await withWatchingClient(transport, async ({ server, client }) => {
      await until("in sync", () => client.watchedNodePods?.(NODE_NAME) !== undefined);
      const big = onNode("kube-system/etcd");
      big.metadata.annotations = { note: "é".repeat(100_000) };
      server.setPods([big]);
      await until("the pod arrives", () => client.watchedNodePods?.(NODE_NAME)?.length === 1);
      assertEquals(
        client.watchedNodePods?.(NODE_NAME),
        value(await client.listNodePods(NODE_NAME)),
      );
    });
  });
}
