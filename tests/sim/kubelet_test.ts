/** The simulated kubelet: its /pods document, static pods, text errors and read-only port. */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { startSimKubelet } from "../../lib/sim/kubelet.ts";
import { pod } from "../helpers/pods.ts";
import { NODE_NAME, rawGet, simCluster, using } from "./harness.ts";

Deno.test("sim kubelet lists its pods, static pods as the kubelet renames them", async () => {
  const cluster = await simCluster();
  await using(
    startSimKubelet({ nodeName: NODE_NAME, clientCaPem: cluster.ca.certPem, readonlyPort: true }),
    async (kubelet) => {
      kubelet.setPods([pod("default/web")]);
      kubelet.setStaticPods([pod("kube-system/kube-apiserver")]);
      const secure = await rawGet(`${kubelet.url}/pods`, {
        caPem: kubelet.servingCertPem,
        ...cluster.nodeClient,
      });
      const list = JSON.parse(secure.body);
      assertEquals([secure.status, list.kind, list.apiVersion, list.metadata], [
        200,
        "PodList",
        "v1",
        {},
      ]);
      const [web, mirror] = list.items;
      assertEquals([web.kind, web.metadata.name], [undefined, "web"]);
      assertEquals(mirror.metadata.name, `kube-apiserver-${NODE_NAME}`);
      assertEquals(mirror.spec.nodeName, NODE_NAME);
      assertEquals(mirror.metadata.annotations["kubernetes.io/config.source"], "file");
      assert(/^[0-9a-f]{8}$/.test(mirror.metadata.annotations["kubernetes.io/config.hash"]));

      const readonly = await rawGet(`${kubelet.readonlyUrl}/pods`);
      assertEquals(JSON.parse(readonly.body), list);
    },
  );
});

Deno.test("sim kubelet without pods answers null items, as a real one does", async () => {
  const cluster = await simCluster();
  await using(
    startSimKubelet({ nodeName: NODE_NAME, clientCaPem: cluster.ca.certPem }),
    async (kubelet) => {
      const answer = await rawGet(`${kubelet.url}/pods`, {
        caPem: kubelet.servingCertPem,
        ...cluster.nodeClient,
      });
      assertEquals(answer.body, '{"kind":"PodList","apiVersion":"v1","metadata":{},"items":null}');
    },
  );
});

Deno.test("sim kubelet answers errors in plain text, as the kubelet does", async () => {
  const cluster = await simCluster();
  await using(
    startSimKubelet({ nodeName: NODE_NAME, clientCaPem: cluster.ca.certPem }),
    async (kubelet) => {
      const anonymous = await rawGet(`${kubelet.url}/pods`);
      assertEquals([anonymous.status, anonymous.contentType, anonymous.body], [
        401,
        "text/plain; charset=utf-8",
        "Unauthorized",
      ]);
      const elsewhere = await rawGet(`${kubelet.url}/healthz/x`, cluster.nodeClient);
      assertEquals([elsewhere.status, elsewhere.body], [404, "404 page not found"]);
      kubelet.secure.setFault("forbidden");
      const forbidden = await rawGet(`${kubelet.url}/pods`, cluster.nodeClient);
      assertEquals(forbidden.status, 403);
      assert(forbidden.body.startsWith("Forbidden (user="));
    },
  );
});
