/** The kubelet client against the simulated kubelet: secure port, CA pinning, read-only fallback. */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { type Pod, podId } from "../../lib/core/pod.ts";
import type { Credentials } from "../../lib/sources/kubeconfig.ts";
import { createKubeletClient, type KubeletClientOptions } from "../../lib/sources/kubelet.ts";
import type { SourceResult } from "../../lib/sources/types.ts";
import { type SimKubelet, startSimKubelet } from "../../lib/sim/kubelet.ts";
import { createSelfSignedServerCert } from "../../lib/sim/pki.ts";
import { parent, pod } from "../helpers/pods.ts";
import { NODE_NAME, type SimCluster, simCluster, using } from "../sim/harness.ts";

const TIMEOUT_MS = 5_000;

function failure<T>(result: SourceResult<T>) {
  if (result.ok) throw new Error(`expected a failure, got ${JSON.stringify(result.value)}`);
  return result.failure;
}

function ids(result: SourceResult<Pod[]>): string[] {
  if (!result.ok) throw new Error(`expected pods, got: ${result.failure.message}`);
  return result.value.map(podId);
}

function nodeCredentials(cluster: SimCluster): Credentials {
  return {
    server: "https://127.0.0.1:6443",
    insecure: false,
    caPem: cluster.ca.certPem,
    certPem: cluster.nodeClient.certPem,
    keyPem: cluster.nodeClient.keyPem,
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
      await fn(kubelet, cluster);
    },
  );
}

function client(
  kubelet: SimKubelet,
  cluster: SimCluster,
  extra: Partial<KubeletClientOptions> = {},
) {
  return createKubeletClient({
    url: kubelet.url,
    creds: nodeCredentials(cluster),
    timeoutMs: TIMEOUT_MS,
    ...extra,
  });
}

Deno.test("a kubelet with a self-signed certificate is accepted when no CA is configured", async () => {
  await withKubelet(async (kubelet, cluster) => {
    const result = await client(kubelet, cluster).listPods();
    assertEquals(ids(result), [
      "kube-system/kube-apiserver",
      "default/web",
      `kube-system/etcd-${NODE_NAME}`,
    ]);
    assert(result.ok);
    // The static pod is shown the way the planner recognises it.
    const etcd = result.value[2];
    assertEquals(etcd.metadata.annotations?.["kubernetes.io/config.source"], "file");
    assertEquals((etcd.spec as { nodeName?: string }).nodeName, NODE_NAME);
    assertEquals(kubelet.secure.requests.map((r) => [r.target, r.authenticatedAs]), [
      ["/pods", `cert:system:node:${NODE_NAME}`],
    ]);
  });
});

Deno.test("a configured kubelet CA is enforced", async () => {
  await withKubelet(async (kubelet, cluster) => {
    const pinned = await client(kubelet, cluster, { caPem: kubelet.servingCertPem }).listPods();
    assertEquals(ids(pinned).length, 3);

    const impostorCa = (await createSelfSignedServerCert("someone-else")).certPem;
    const f = failure(await client(kubelet, cluster, { caPem: impostorCa }).listPods());
    assertEquals([f.source, f.kind], ["kubelet", "unreachable"]);
    assertEquals(kubelet.secure.requests.length, 1, "nothing is sent to an unverified kubelet");
  });
});

Deno.test("the kubelet requires a client certificate", async () => {
  await withKubelet(async (kubelet, cluster) => {
    const { certPem: _cert, keyPem: _key, ...anonymous } = nodeCredentials(cluster);
    const f = failure(await client(kubelet, cluster, { creds: anonymous }).listPods());
    assertEquals([f.kind, f.status], ["unauthorized", 401]);
  });
});

Deno.test("a bearer token goes only to a kubelet whose certificate was verified", async () => {
  await withKubelet(async (kubelet, cluster) => {
    kubelet.secure.acceptTokens(["node-token"]);
    const creds: Credentials = {
      server: "https://127.0.0.1:6443",
      insecure: false,
      token: "node-token",
    };
    const unverified = failure(await client(kubelet, cluster, { creds }).listPods());
    assertEquals(unverified.kind, "unauthorized");
    const verified = await client(kubelet, cluster, { creds, caPem: kubelet.servingCertPem })
      .listPods();
    assertEquals(ids(verified).length, 3);
    assertEquals(kubelet.secure.requests.map((r) => r.authenticatedAs), [
      undefined,
      "token:node-token",
    ]);
  });
});

Deno.test("the read-only port is asked only when the secure port fails", async () => {
  await withKubelet(async (kubelet, cluster) => {
    const readonly = kubelet.readonly!;
    const kubeletClient = client(kubelet, cluster, { readonlyUrl: kubelet.readonlyUrl });
    assertEquals(ids(await kubeletClient.listPods()).length, 3);
    assertEquals(readonly.requestCount("/pods"), 0);

    // During an outage the secure port often cannot authorize anyone.
    kubelet.secure.setFault("forbidden");
    assertEquals(ids(await kubeletClient.listPods()).length, 3);
    assertEquals(readonly.requestCount("/pods"), 1);
    assertEquals(readonly.requests[0].authenticatedAs, undefined);
  }, true);
});

Deno.test("when both ports fail, the failure says both reasons", async () => {
  await withKubelet(async (kubelet, cluster) => {
    kubelet.secure.setFault("forbidden");
    kubelet.readonly!.setFault("server-error");
    const f = failure(
      await client(kubelet, cluster, { readonlyUrl: kubelet.readonlyUrl }).listPods(),
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
