/**
 * Our HTTP/2 client against an implementation of its own: Node's http2 (nghttp2), started as a
 * process (tests/sources/h2_node_server.mjs) over TLS with client certificates. It caps a
 * connection at two streams, pads every frame, compresses its headers as nghttp2 does (Huffman,
 * the dynamic table), sends PINGs, RST_STREAM and GOAWAY, and streams more than our windows.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { createSimCa } from "../../lib/sim/pki.ts";
import { CERTIFICATE_NOT_VERIFIED, type HttpTarget } from "../../lib/sources/http.ts";
import type { WatchClients } from "../../lib/sources/watch_clients.ts";
import { watchClients } from "../../lib/sources/watch_stream.ts";
import { lines } from "../../bench/pass_protocol.ts";
import { withTempDir } from "../helpers/temp_dir.ts";
import { until } from "../helpers/until.ts";
import { targetFor, watchOf } from "./h2_watch.ts";

const SERVER_SCRIPT = new URL("./h2_node_server.mjs", import.meta.url).pathname;

function nodeVersion(): string | undefined {
  try {
    const out = new Deno.Command("node", { args: ["--version"], stdout: "piped", stderr: "null" })
      .outputSync();
    return out.success ? new TextDecoder().decode(out.stdout).trim() : undefined;
  } catch {
    return undefined;
  }
}

const NODE = nodeVersion();
if (NODE === undefined) console.warn("h2_interop_test: no `node` on PATH; its tests are ignored");

async function withNodeServer(
  fn: (target: HttpTarget, clients: WatchClients, otherCa: string) => Promise<void>,
) {
  const ca = await createSimCa();
  const other = await createSimCa("another-ca");
  const serving = await ca.issueServerCert("h2-node");
  const client = await ca.issueClientCert({ commonName: "system:node:node-1" });
  await withTempDir(async (dir) => {
    Deno.writeTextFileSync(join(dir, "server.pem"), serving.certPem);
    Deno.writeTextFileSync(join(dir, "server-key.pem"), serving.keyPem);
    Deno.writeTextFileSync(join(dir, "ca.pem"), ca.certPem);
    const child = new Deno.Command("node", {
      args: [SERVER_SCRIPT, dir],
      stdin: "piped",
      stdout: "piped",
    }).spawn();
    const out = lines(child.stdout);
    const port = Number((await out.next()).value);
    const target = targetFor(port, { caPem: ca.certPem, ...client });
    const clients = watchClients(target)!;
    try {
      await fn(target, clients, other.certPem);
    } finally {
      clients.close();
      await child.stdin.close();
      await child.status;
      await out.return(undefined);
    }
  });
}

const nodeTest = (name: string, fn: Parameters<typeof withNodeServer>[0]) =>
  Deno.test({ name: `nghttp2: ${name}`, ignore: NODE === undefined, fn: () => withNodeServer(fn) });

nodeTest(
  "a watch longer than every window arrives whole, padded; the request as sent",
  async (target, clients) => {
    // 300 events of 32 KiB: more than a stream's window (1 MiB) and the connection's (8 MiB).
    const big = watchOf(target, clients, "/watch?events=300&bytes=32768", "t0ken");
    await until("the watch ended", () => big.ended !== undefined);
    assertEquals(big.ended, {});
    assertEquals(big.events.map((e) => e.object.n), Array.from({ length: 300 }, (_, n) => n));
    assertEquals(big.events[0].object.echo, {
      method: "GET",
      authority: new URL(target.baseUrl).host,
      path: "/watch?events=300&bytes=32768",
      authorization: "Bearer t0ken",
      accept: "application/json",
    });
    // Another on the same connection: its head's fields now come from the dynamic table.
    const small = watchOf(target, clients, "/watch?events=3");
    await until("the second ended", () => small.ended !== undefined);
    assertEquals(small.ended, {});
    assertEquals(small.events.length, 3);
    assertEquals(clients.size, 1);
  },
);

nodeTest(
  "two streams a connection: five watches take three; emptied extra ones close",
  async (target, clients) => {
    const watches = Array.from({ length: 5 }, () => watchOf(target, clients, "/hang"));
    await until("every watch open", () => watches.every((w) => w.events.length === 1));
    assertEquals(clients.size, 3);
    for (const w of watches.slice(2)) w.close();
    await until("the extra connections closed", () => clients.size === 1);
    assert(watches.every((w) => w.ended === undefined), "closed watches are told nothing");
    // The first connection's room is used again.
    const again = watchOf(target, clients, "/hang");
    watches[1].close();
    const third = watchOf(target, clients, "/hang");
    await until("both open", () => again.events.length === 1 && third.events.length === 1);
    assertEquals(clients.size, 2);
  },
);

nodeTest("RST_STREAM from the server ends the watch with a failure", async (target, clients) => {
  const reset = watchOf(target, clients, "/reset");
  await until("the watch ended", () => reset.ended !== undefined);
  assertEquals(reset.events.length, 1);
  assertEquals(reset.ended?.failure?.problem, "body cut short");
  const message = reset.ended?.failure?.message ?? "";
  assert(message.includes("stream reset by the server (INTERNAL_ERROR)"), message);
  // The connection goes on.
  const next = watchOf(target, clients, "/watch?events=1");
  await until("the next ended", () => next.ended !== undefined);
  assertEquals(next.ended, {});
});

nodeTest(
  "GOAWAY: a stream above the last fails, the one below runs to its end",
  async (target, clients) => {
    const older = watchOf(target, clients, "/hang");
    await until("the first open", () => older.opened);
    const newer = watchOf(target, clients, "/goaway");
    await until("both ended", () => older.ended !== undefined && newer.ended !== undefined);
    assertEquals(newer.ended?.failure?.kind, "unreachable");
    assert(newer.ended?.failure?.message.includes("GOAWAY"), newer.ended?.failure?.message);
    assertEquals(older.ended, {});
    assertEquals(older.events.map((e) => e.object.n), [0, 1]);
    // A new watch takes a new connection.
    const after = watchOf(target, clients, "/watch?events=1");
    await until("a watch after", () => after.ended !== undefined);
    assertEquals(after.ended, {});
  },
);

nodeTest("the server's PING is answered", async (target, clients) => {
  const pinged = watchOf(target, clients, "/ping");
  await until("the watch ended", () => pinged.ended !== undefined);
  assertEquals(pinged.ended, {});
  assertEquals(pinged.events[0].object, { pinged: true });
});

nodeTest(
  "403 and 410 are status failures, an HTML page is no watch; never nothing",
  async (target, clients) => {
    const forbidden = watchOf(target, clients, "/status?code=403");
    const gone = watchOf(target, clients, "/status?code=410");
    const html = watchOf(target, clients, "/html");
    await until("all ended", () => [forbidden, gone, html].every((w) => w.ended !== undefined));
    assertEquals(forbidden.ended?.failure?.kind, "forbidden");
    assertEquals(forbidden.ended?.failure?.status, 403);
    assert(forbidden.ended?.failure?.message.includes("status 403 as asked"));
    assertEquals(gone.ended?.failure?.status, 410);
    assertEquals(html.ended?.failure?.kind, "bad-response");
    assertEquals(html.ended?.failure?.problem, "not JSON (text/html)");
    assert([forbidden, gone, html].every((w) => !w.opened));
  },
);

nodeTest(
  "a server the kubeconfig's CA did not sign: unreachable, the certificate named",
  async (target, _clients, otherCa) => {
    const wrong = { ...target, tls: { ...target.tls!, caPem: otherCa } };
    const clients = watchClients(wrong)!;
    try {
      const refused = watchOf(wrong, clients, "/watch");
      await until("the watch ended", () => refused.ended !== undefined);
      assertEquals(refused.ended?.failure?.kind, "unreachable");
      assertEquals(refused.ended?.failure?.problem, CERTIFICATE_NOT_VERIFIED);
    } finally {
      clients.close();
    }
  },
);
