/**
 * The kubelet client against the simulated kubelet: which credentials go to the secure port
 * under each kubeletCaFile rule, the read-only fallback, answers that are not a pod list.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { podId } from "../../lib/core/pod.ts";
import type { Credentials } from "../../lib/sources/kubeconfig.ts";
import {
  createKubeletClient,
  type KubeletCa,
  type KubeletClientOptions,
  type KubeletPods,
} from "../../lib/sources/kubelet.ts";
import type { SourceFailure, SourceResult } from "../../lib/sources/types.ts";
import { type SimKubelet, startSimKubelet } from "../../lib/sim/kubelet.ts";
import { podListBody } from "../../lib/sim/apiserver.ts";
import { type PeerControl, startSimPeer } from "../../lib/sim/peer.ts";
import { createSelfSignedServerCert } from "../../lib/sim/pki.ts";
import { parent, pod } from "../helpers/pods.ts";
import { NODE_NAME, type SimCluster, simCluster, using } from "../sim/harness.ts";

const TIMEOUT_MS = 5_000;
const CLUSTER_CA_ORIGIN = "kubeconfig /etc/kubernetes/kubelet.conf: " +
  "clusters[0].cluster.certificate-authority-data";

function failure<T>(result: SourceResult<T>) {
  if (result.ok) throw new Error(`expected a failure, got ${JSON.stringify(result.value)}`);
  return result.failure;
}

function ids(result: SourceResult<KubeletPods>): string[] {
  if (!result.ok) throw new Error(`expected pods, got: ${result.failure.message}`);
  return result.value.pods.map(podId);
}

/** Whether the answer was read with the kubelet's certificate verified. */
function verified(result: SourceResult<KubeletPods>): boolean {
  if (!result.ok) throw new Error(`expected pods, got: ${result.failure.message}`);
  return result.value.verified;
}

/** A kubelet's own credentials: its client certificate, and the cluster CA. */
function nodeCredentials(cluster: SimCluster, extra: Partial<Credentials> = {}): Credentials {
  return {
    server: "https://127.0.0.1:6443",
    insecure: false,
    caPem: cluster.ca.certPem,
    caOrigin: CLUSTER_CA_ORIGIN,
    certPem: cluster.nodeClient.certPem,
    keyPem: cluster.nodeClient.keyPem,
    ...extra,
  };
}

/** A bootstrap-style kubeconfig: a token and the cluster CA, no client certificate. */
function tokenCredentials(cluster: SimCluster): Credentials {
  return {
    server: "https://127.0.0.1:6443",
    insecure: false,
    caPem: cluster.ca.certPem,
    caOrigin: CLUSTER_CA_ORIGIN,
    token: "node-token",
  };
}

async function withKubelet(
  fn: (kubelet: SimKubelet, cluster: SimCluster) => Promise<void>,
  readonlyPort = false,
): Promise<void> {
  const cluster = await simCluster();
  await using(
    startSimKubelet({ nodeName: NODE_NAME, clientCaPem: cluster.ca.certPem, readonlyPort }),
    async (kubelet) => {
      kubelet.setPods([parent("kube-system/kube-apiserver"), pod("default/web")]);
      kubelet.setStaticPods([pod("kube-system/etcd")]);
      kubelet.secure.acceptTokens(["node-token"]);
      await fn(kubelet, cluster);
    },
  );
}

function client(
  kubelet: { url: string },
  cluster: SimCluster,
  extra: Partial<KubeletClientOptions> = {},
) {
  return createKubeletClient({
    url: kubelet.url,
    ca: { kind: "cluster" },
    creds: nodeCredentials(cluster),
    timeoutMs: TIMEOUT_MS,
    env: {},
    ...extra,
  });
}

function pinned(kubelet: SimKubelet): KubeletCa {
  return { kind: "file", path: "/var/lib/kubelet/pki/kubelet.crt", pem: kubelet.servingCertPem };
}

/** Who each request to the secure port authenticated as, and the token it carried. */
function seen(peer: PeerControl) {
  return peer.requests.map((r) => [r.authenticatedAs, r.bearerToken]);
}

Deno.test("kubeletCaFile set: the kubelet is verified with it, and a token may go to it", async () => {
  await withKubelet(async (kubelet, cluster) => {
    const result = await client(kubelet, cluster, { ca: pinned(kubelet) }).listPods();
    assertEquals(ids(result), [
      "kube-system/kube-apiserver",
      "default/web",
      `kube-system/etcd-${NODE_NAME}`,
    ]);
    assert(result.ok);
    assertEquals(result.value.verified, true);
    // The static pod is shown the way the planner recognises it.
    const etcd = result.value.pods[2];
    assertEquals(etcd.metadata.annotations?.["kubernetes.io/config.source"], "file");
    assertEquals((etcd.spec as { nodeName?: string }).nodeName, NODE_NAME);

    const withToken = client(kubelet, cluster, {
      ca: pinned(kubelet),
      creds: tokenCredentials(cluster),
    });
    assertEquals(ids(await withToken.listPods()).length, 3);
    assertEquals(seen(kubelet.secure), [
      [`cert:system:node:${NODE_NAME}`, undefined],
      ["token:node-token", "node-token"],
    ]);
  });
});

Deno.test("kubeletCaFile set but not the kubelet's CA: misconfigured, naming it; nothing sent", async () => {
  await withKubelet(async (kubelet, cluster) => {
    const impostorCa = (await createSelfSignedServerCert("someone-else")).certPem;
    const ca: KubeletCa = { kind: "file", path: "/etc/kubernetes/kubelet-ca.crt", pem: impostorCa };
    for (const creds of [nodeCredentials(cluster), tokenCredentials(cluster)]) {
      const f: SourceFailure = failure(await client(kubelet, cluster, { ca, creds }).listPods());
      assertEquals([f.source, f.kind], ["kubelet", "misconfigured"]);
      assert(
        f.message.includes(
          "the kubelet's serving certificate could not be verified against kubeletCaFile " +
            "/etc/kubernetes/kubelet-ca.crt (self-signed certificate",
        ),
        f.message,
      );
      assert(f.message.includes("set kubeletCaFile to the CA that signed"), f.message);
    }
    assertEquals(kubelet.secure.requests, [], "nothing is sent to an unverified kubelet");
  });
});

Deno.test("unset: a kubelet whose certificate the cluster CA signed is verified, token and all", async () => {
  const cluster = await simCluster();
  const serving = await cluster.ca.issueServerCert(NODE_NAME);
  const list = podListBody([pod("default/web")]);
  await using(
    startSimPeer({
      tls: { ...serving, clientCaPem: cluster.ca.certPem },
      handle: () => ({ status: 200, body: list }),
      failure: () => ({ status: 500, body: "" }),
    }),
    async (kubelet) => {
      kubelet.acceptTokens(["node-token"]);
      const warnings: string[] = [];
      const onUnverified = (message: string) => warnings.push(message);
      assertEquals(ids(await client(kubelet, cluster, { onUnverified }).listPods()), [
        "default/web",
      ]);
      const token = client(kubelet, cluster, { creds: tokenCredentials(cluster), onUnverified });
      const answer = await token.listPods();
      assertEquals([ids(answer), verified(answer)], [["default/web"], true]);
      assertEquals(seen(kubelet), [
        [`cert:system:node:${NODE_NAME}`, undefined],
        ["token:node-token", "node-token"],
      ]);
      assertEquals(warnings, []);
    },
  );
});

Deno.test("one connection serves call after call; when the kubelet closes it, the next call opens another", async () => {
  await withKubelet(async (kubelet, cluster) => {
    const kubeletClient = client(kubelet, cluster, { ca: pinned(kubelet) });
    for (let i = 0; i < 3; i++) assertEquals(ids(await kubeletClient.listPods()).length, 3);
    assertEquals(kubelet.secure.connections(), { accepted: 1, open: 1 });
    // A kubelet that restarts drops every connection.
    await kubelet.secure.stopListening();
    await kubelet.secure.resumeListening();
    // The dropped connection may still look idle to the client for the first call after.
    const after = [await kubeletClient.listPods(), await kubeletClient.listPods()];
    assertEquals(ids(after[1]).length, 3);
    assertEquals(kubelet.secure.connections().open, 1);
  });
});

Deno.test("unset, self-signed kubelet, client certificate: asked unverified, said once, one handshake after", async () => {
  await withKubelet(async (kubelet, cluster) => {
    const warnings: [string, Record<string, string>][] = [];
    const kubeletClient = client(kubelet, cluster, {
      onUnverified: (message, fields) => warnings.push([message, fields]),
    });
    for (let i = 0; i < 3; i++) {
      const answer = await kubeletClient.listPods();
      // Anyone who holds the port may have said it: it may add no parent.
      assertEquals([ids(answer).length, verified(answer)], [3, false]);
    }
    assertEquals(seen(kubelet.secure), [
      [`cert:system:node:${NODE_NAME}`, undefined],
      [`cert:system:node:${NODE_NAME}`, undefined],
      [`cert:system:node:${NODE_NAME}`, undefined],
    ]);
    // The verified attempt once, then one connection kept for every call.
    assertEquals(kubelet.secure.connections().accepted, 2);
    assertEquals(warnings.length, 1);
    const [message, fields] = warnings[0];
    assert(message.includes("not signed by the cluster CA"), message);
    assert(message.includes("unverified, with the client certificate only"), message);
    assert(message.includes("its answers add no parent"), message);
    assert(message.includes("set kubeletCaFile"), message);
    assert(message.includes("/var/lib/kubelet/pki/kubelet.crt"), message);
    assert(message.includes("kubeletCaFile to off"), message);
    assert(fields.error.includes(CLUSTER_CA_ORIGIN), fields.error);

    // Without a CA in the kubeconfig, the system's roots are what did not verify it.
    const noCa = nodeCredentials(cluster, { caPem: undefined, caOrigin: undefined });
    const fallback: string[] = [];
    const systemRoots = client(kubelet, cluster, {
      creds: noCa,
      onUnverified: (_m, f) => fallback.push(f.error),
    });
    assertEquals(ids(await systemRoots.listPods()).length, 3);
    assert(fallback[0].includes("the system's roots"), fallback[0]);
  });
});

Deno.test("unset, self-signed kubelet, a token: not asked, misconfigured, naming the CA and kubeletCaFile", async () => {
  await withKubelet(async (kubelet, cluster) => {
    for (
      const creds of [
        tokenCredentials(cluster),
        nodeCredentials(cluster, { token: "node-token" }),
      ]
    ) {
      const f = failure(await client(kubelet, cluster, { creds }).listPods());
      assertEquals([f.source, f.kind], ["kubelet", "misconfigured"]);
      assert(
        f.message.includes(
          "the kubelet's serving certificate could not be verified against the kubeconfig's " +
            `cluster CA (${CLUSTER_CA_ORIGIN})`,
        ),
        f.message,
      );
      assert(f.message.includes("so the bearer token was not sent"), f.message);
      assert(f.message.includes("set kubeletCaFile to the CA that signed"), f.message);
      assert(!f.message.includes("RBAC"), f.message);
    }
    assertEquals(kubelet.secure.requests, [], "the token never reached the kubelet");
  });
});

Deno.test("off: not verified, the client certificate only, never a token", async () => {
  await withKubelet(async (kubelet, cluster) => {
    const off: KubeletCa = { kind: "off" };
    const warnings: string[] = [];
    const onUnverified = (message: string) => warnings.push(message);
    const answer = await client(kubelet, cluster, { ca: off, onUnverified }).listPods();
    assertEquals([ids(answer).length, verified(answer)], [3, false]);
    const both = nodeCredentials(cluster, { token: "node-token" });
    assertEquals(
      ids(await client(kubelet, cluster, { ca: off, creds: both }).listPods()).length,
      3,
    );
    assertEquals(seen(kubelet.secure), [
      [`cert:system:node:${NODE_NAME}`, undefined],
      [`cert:system:node:${NODE_NAME}`, undefined],
    ]);
    // One handshake per call: nothing is tried verified first; and nothing to warn about.
    assertEquals(kubelet.secure.connections().accepted, 2);
    assertEquals(warnings, []);

    const f = failure(
      await client(kubelet, cluster, { ca: off, creds: tokenCredentials(cluster) }).listPods(),
    );
    assertEquals(f.kind, "misconfigured");
    assert(f.message.includes("kubeletCaFile is off"), f.message);
    assert(f.message.includes("so the bearer token was not sent"), f.message);
    assertEquals(kubelet.secure.requests.length, 2);
  });
});

Deno.test("the kubelet requires a client certificate", async () => {
  await withKubelet(async (kubelet, cluster) => {
    const anonymous = nodeCredentials(cluster, { certPem: undefined, keyPem: undefined });
    const f = failure(
      await client(kubelet, cluster, { ca: pinned(kubelet), creds: anonymous }).listPods(),
    );
    assertEquals([f.kind, f.status], ["unauthorized", 401]);
  });
});

Deno.test("the read-only port is asked only when the secure port fails", async () => {
  await withKubelet(async (kubelet, cluster) => {
    const readonly = kubelet.readonly!;
    const said: [string, Record<string, string>][] = [];
    const kubeletClient = client(kubelet, cluster, {
      ca: pinned(kubelet),
      readonlyUrl: kubelet.readonlyUrl,
      onUnverified: (message, fields) => said.push([message, fields]),
    });
    assertEquals(verified(await kubeletClient.listPods()), true);
    assertEquals(readonly.requestCount("/pods"), 0);

    // During an outage the secure port often cannot authorize anyone. Plain HTTP is anyone's:
    // its answer adds no parent, said once.
    kubelet.secure.setFault("forbidden");
    for (let i = 0; i < 2; i++) {
      const answer = await kubeletClient.listPods();
      assertEquals([ids(answer).length, verified(answer)], [3, false]);
    }
    assertEquals(readonly.requestCount("/pods"), 2);
    assertEquals(readonly.requests[0].authenticatedAs, undefined);
    assertEquals(said.length, 1);
    assert(said[0][0].includes("read-only port") && said[0][0].includes("add no parent"));
    assertEquals(said[0][1].kubelet, kubelet.readonlyUrl);

    // A token kubeconfig meeting an unverifiable kubelet still has the read-only port.
    const token = client(kubelet, cluster, {
      creds: tokenCredentials(cluster),
      readonlyUrl: kubelet.readonlyUrl,
    });
    assertEquals(ids(await token.listPods()).length, 3);
    assertEquals(readonly.requestCount("/pods"), 3);
  }, true);
});

Deno.test("when both ports fail, the failure says both reasons", async () => {
  await withKubelet(async (kubelet, cluster) => {
    kubelet.secure.setFault("forbidden");
    kubelet.readonly!.setFault("server-error");
    const f = failure(
      await client(kubelet, cluster, { ca: pinned(kubelet), readonlyUrl: kubelet.readonlyUrl })
        .listPods(),
    );
    assertEquals([f.source, f.kind, f.status], ["kubelet", "forbidden", 403]);
    assert(
      f.message.startsWith(`GET ${kubelet.url}/pods: 403 Forbidden: Forbidden (user=`),
      f.message,
    );
    assert(
      f.message.includes(
        `; read-only port: GET ${kubelet.readonlyUrl}/pods: 500 Internal Server Error`,
      ),
      f.message,
    );

    await kubelet.readonly!.stopListening();
    const closed = failure(
      await client(kubelet, cluster, { readonlyUrl: kubelet.readonlyUrl }).listPods(),
    );
    assert(closed.message.includes("read-only port:") && closed.message.includes("ECONNREFUSED"));
  }, true);
});

Deno.test("a kubelet that never answers times out", async () => {
  await withKubelet(async (kubelet, cluster) => {
    kubelet.secure.setFault("hang");
    const f = failure(await client(kubelet, cluster, { timeoutMs: 200 }).listPods());
    assertEquals(f.kind, "timeout");
  });
});

Deno.test("a 200 that is not a pod list is the kubelet unavailable, never no pods", async () => {
  await withKubelet(async (kubelet, cluster) => {
    const expected: Record<string, [string, string]> = {
      html: ["not JSON (text/html)", '"<!DOCTYPE html>\\n<html><head><title>Service Unavailable'],
      truncated: ["body cut short", '"{\\"kind\\":\\"PodList\\",\\"apiVersion\\":\\"v1\\"'],
      "wrong-kind": [
        'unexpected body: kind: expected "PodList"',
        '"{\\"kind\\":\\"SecretList\\"',
      ],
    };
    const kubeletClient = client(kubelet, cluster, { ca: pinned(kubelet) });
    for (const [fault, [problem, start]] of Object.entries(expected)) {
      kubelet.secure.setFault(fault as "html" | "truncated" | "wrong-kind");
      const f = failure(await kubeletClient.listPods());
      assertEquals([fault, f.kind, f.problem], [fault, "bad-response", problem]);
      assert(f.message.includes(`: ${start}`), f.message);
    }
  });
});

Deno.test('a kubelet with no pods answers "items": null: an empty list', async () => {
  const cluster = await simCluster();
  const serving = await cluster.ca.issueServerCert(NODE_NAME);
  // Byte for byte what a kubelet without pods answers (Go encodes an empty slice as null).
  const body = '{"kind":"PodList","apiVersion":"v1","metadata":{},"items":null}\n';
  await using(
    startSimPeer({
      tls: { ...serving, clientCaPem: cluster.ca.certPem },
      handle: () => ({ status: 200, body: JSON.parse(body) }),
      failure: () => ({ status: 500, body: "" }),
    }),
    async (kubelet) => {
      assertEquals(await client(kubelet, cluster).listPods(), {
        ok: true,
        value: { pods: [], verified: true },
      });
    },
  );
});

Deno.test("the same answer again is the same pods; a change, or a bad answer between, is seen", async () => {
  await withKubelet(async (kubelet, cluster) => {
    const kubeletClient = client(kubelet, cluster, { ca: pinned(kubelet) });
    const first = await kubeletClient.listPods();
    assertEquals(await kubeletClient.listPods(), first);
    kubelet.setPods([parent("kube-system/kube-apiserver")]);
    assertEquals(ids(await kubeletClient.listPods()).length, 2);
    kubelet.secure.setFault("html");
    assertEquals(failure(await kubeletClient.listPods()).kind, "bad-response");
    kubelet.secure.setFault("none");
    assertEquals(ids(await kubeletClient.listPods()).length, 2);
    kubelet.setPods([parent("kube-system/kube-apiserver"), pod("default/web")]);
    assertEquals(ids(await kubeletClient.listPods()), ids(first));
  });
});
