/**
 * Run as its own process by peer_h2_test.ts: lists by the hundred on one HTTP/2 connection to
 * the simulated API server, closed by the client; then many watches streaming from it (on the
 * agent's own connections and on fetch's, after a few calls), ended by the client's GOAWAY on
 * every other round and by the server's port closing with every connection dropped on each, many
 * times over. Prints "survived N" and exits 0; a server that cannot take it kills the process
 * instead (Deno's node:http2 did: denoland/deno#36788).
 */
import { startSimApiServer } from "../../lib/sim/apiserver.ts";
import { createSimCa } from "../../lib/sim/pki.ts";
import { createDirectHttpClient } from "../../lib/util/direct_http.ts";
import { watchClients } from "../../lib/sources/watch_stream.ts";
import { targetFor, watchOf } from "../sources/h2_watch.ts";
import { until } from "../helpers/until.ts";

const [cycles, watchesText] = Deno.args;
const WATCHES = Number(watchesText);
const ca = await createSimCa();
const client = await ca.issueClientCert({ commonName: "system:node:probe" });
const server = await startSimApiServer(ca);
const tls = { caPem: ca.certPem, certPem: client.certPem, keyPem: client.keyPem };
const target = targetFor(server.port, tls);
const path = "/api/v1/namespaces/kube-system/secrets?watch=true&timeoutSeconds=3600";
const http2Only: Deno.CreateHttpClientOptions & Deno.TlsCertifiedKeyPem = {
  http2: true,
  http1: false,
  caCerts: [tls.caPem],
  cert: tls.certPem,
  key: tls.keyPem,
};

// First, lists answered on a connection by the hundred, then the client's GOAWAY: with the server
// on Deno's node:http2, this alone aborted the process (an nghttp2 assertion, exit 134) or
// segfaulted it (exit 139) in each of four runs.
for (let i = 0; i < 200; i++) {
  server.setSecret("kube-system", `secret-${i}`, { key: "v".repeat(100) });
}
for (let round = 0; round < 2; round++) {
  const fetchClient = createDirectHttpClient(http2Only);
  for (let call = 0; call < 150; call++) {
    const answer = await fetch(`${server.url}/api/v1/namespaces/kube-system/secrets`, {
      client: fetchClient,
    });
    if (answer.status !== 200) throw new Error(`round ${round}: list ${answer.status}`);
    await answer.arrayBuffer();
  }
  fetchClient.close();
}

for (let cycle = 0; cycle < Number(cycles); cycle++) {
  // A few calls answered on the connection first, then watches on it.
  const fetchClient = createDirectHttpClient(http2Only);
  for (let call = 0; call <= cycle % 5; call++) {
    const answer = await fetch(`${server.url}/version`, { client: fetchClient });
    if (answer.status !== 200) throw new Error(`cycle ${cycle}: /version ${answer.status}`);
    await answer.body?.cancel();
  }
  const clients = watchClients(target)!;
  const ours = Array.from({ length: WATCHES }, () => watchOf(target, clients, path));
  const fetched = Array.from({ length: WATCHES }, async () => {
    try {
      const answer = await fetch(`${server.url}${path}`, { client: fetchClient });
      await answer.body?.pipeTo(new WritableStream());
    } catch {
      // Cut short by the drop, as asked.
    }
  });
  await until("every watch open", () => server.watchesOpen() === 2 * WATCHES);
  if (cycle % 2 === 1) clients.close();
  await server.stopListening();
  await until("ours ended", () => ours.every((watch) => watch.ended !== undefined));
  await Promise.all(fetched);
  clients.close();
  fetchClient.close();
  await server.resumeListening();
}
await server.close();
console.log(`survived ${cycles}`);
