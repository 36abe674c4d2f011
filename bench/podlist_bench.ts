/**
 * The API server pod list at scale: 1,000 realistic pods (tests/fixtures/kube-apiserver-pod.json,
 * about 5.5 KB each) fetched over mTLS from the simulated API server and validated.
 * Run: deno bench --allow-all bench/podlist_bench.ts
 */
import type { Pod } from "../lib/core/pod.ts";
import { startSimApiServer } from "../lib/sim/apiserver.ts";
import { createSimCa } from "../lib/sim/pki.ts";
import { createApiServerClient } from "../lib/sources/apiserver.ts";

const NODE = "node-1";
const POD_COUNT = 1_000;

const fixture: Pod = JSON.parse(
  await Deno.readTextFile(new URL("../tests/fixtures/kube-apiserver-pod.json", import.meta.url)),
);
const pods = Array.from({ length: POD_COUNT }, (_, i): Pod => ({
  ...fixture,
  metadata: { ...fixture.metadata, name: `pod-${i}`, uid: `uid-${i}` },
  spec: { ...fixture.spec, nodeName: NODE },
}));

const ca = await createSimCa();
const client = await ca.issueClientCert({ commonName: `system:node:${NODE}` });
const server = await startSimApiServer(ca);
server.setPods(pods);
const api = createApiServerClient(
  { server: server.url, insecure: false, caPem: ca.certPem, ...client },
  30_000,
);

const first = await api.listNodePods(NODE);
if (!first.ok || first.value.length !== POD_COUNT) throw new Error("the list did not come back");
const bytes = new TextEncoder().encode(JSON.stringify({ items: first.value })).length;
console.log(`PodList of ${POD_COUNT} pods: ${(bytes / 1024 / 1024).toFixed(1)} MiB of JSON`);

Deno.bench(`listNodePods, ${POD_COUNT} pods over mTLS`, async () => {
  const result = await api.listNodePods(NODE);
  if (!result.ok) throw new Error(result.failure.message);
});

// Every call opens a fresh TLS connection (lib/sources/http.ts): this is that fixed cost.
Deno.bench("listNodePods, no pods on the node over mTLS", async () => {
  const result = await api.listNodePods("node-without-pods");
  if (!result.ok) throw new Error(result.failure.message);
});
