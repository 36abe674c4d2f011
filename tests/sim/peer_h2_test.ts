/**
 * The simulated API server speaks HTTP/2 where the client offers it (ALPN), as the real one
 * does, and a drop of its connections with many streams open leaves the process alive.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { startSimApiServer } from "../../lib/sim/apiserver.ts";
import { createDirectHttpClient } from "../../lib/util/direct_http.ts";
import { watchClients } from "../../lib/sources/watch_stream.ts";
import { targetFor, watchOf } from "../sources/h2_watch.ts";
import { assertSurvives } from "../helpers/survival_probe.ts";
import { until } from "../helpers/until.ts";
import { simCluster, using } from "./harness.ts";

const WATCH = "/api/v1/namespaces/kube-system/secrets?watch=true&timeoutSeconds=3600";

for (const http2 of [true, false]) {
  Deno.test(`the sim API server answers ${http2 ? "HTTP/2 to clients that offer it" : "HTTP/1.1 only, when told"}: our watch connections, fetch`, async () => {
    const cluster = await simCluster();
    await using(startSimApiServer(cluster.ca, { http2 }), async (server) => {
      const tls = { caPem: cluster.ca.certPem, ...cluster.nodeClient };
      const target = targetFor(server.port, tls);
      const clients = watchClients(target)!;
      const watch = watchOf(target, clients, WATCH);
      await until("the watch open", () => watch.opened);
      server.setSecret("kube-system", "etcd-certs", { "tls.crt": "one" });
      await until("its event", () => watch.events.length === 1);
      watch.close();
      clients.close();

      for (const offered of [{ http2: true, http1: true }, { http2: false, http1: true }]) {
        const options: Deno.CreateHttpClientOptions & Deno.TlsCertifiedKeyPem = {
          ...offered,
          caCerts: [tls.caPem],
          cert: tls.certPem,
          key: tls.keyPem,
        };
        const client = createDirectHttpClient(options);
        const answer = await fetch(`${server.url}/version`, { client });
        assertEquals(answer.status, 200);
        await answer.body?.cancel();
        client.close();
      }
      const h2 = http2 ? "h2" : "http/1.1";
      assertEquals(server.requests.map((r) => [r.target, r.authenticatedAs, r.protocol]), [
        [WATCH, "cert:system:node:node-1", h2],
        ["/version", "cert:system:node:node-1", h2],
        ["/version", "cert:system:node:node-1", "http/1.1"],
      ]);
    });
  });
}

Deno.test("connections dropped under many HTTP/2 streams, 50 times over, leave the process alive", async () => {
  await assertSurvives(new URL("./peer_drop_probe.ts", import.meta.url), ["50", "20"], "50");
});
