/** The shared GET helper: JSON validation, failure classification, deadlines, caps and TLS. */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import net from "node:net";
import { number, object } from "../../lib/core/schema.ts";
import {
  ConnectionPool,
  getJson,
  type HttpTarget,
  type TlsSettings,
} from "../../lib/sources/http.ts";
import type { SourceResult } from "../../lib/sources/types.ts";
import {
  type PeerResponse,
  type SimPeer,
  type SimPeerOptions,
  startSimPeer,
} from "../../lib/sim/peer.ts";
import { createSimCa } from "../../lib/sim/pki.ts";
import { NODE_NAME, sec1Key, simCluster, using } from "../sim/harness.ts";

const Answer = object({ answer: number() });

/** A plain-HTTP peer answering `/status/<code>` with that code and `/<anything>` from `body`. */
function plainPeer(body: (path: string) => PeerResponse, host?: "::1") {
  const options: SimPeerOptions = {
    ...(host ? { host } : {}),
    handle: (request) => {
      const status = /^\/status\/(\d+)$/.exec(request.path);
      if (status) {
        return {
          status: Number(status[1]),
          body: { kind: "Status", message: `answered ${status[1]}`, code: Number(status[1]) },
        };
      }
      return body(request.path);
    },
    failure: () => ({ status: 503, body: "fault" }),
  };
  return startSimPeer(options);
}

const answering = () => plainPeer(() => ({ status: 200, body: { answer: 42 } }));

function target(baseUrl: string, extra: Partial<HttpTarget> = {}): HttpTarget {
  return { source: "apiserver", baseUrl, timeoutMs: 5_000, ...extra };
}

function failure<T>(result: SourceResult<T>) {
  if (result.ok) throw new Error(`expected a failure, got ${JSON.stringify(result.value)}`);
  return result.failure;
}

Deno.test("getJson returns the body parsed by the schema", async () => {
  await using(answering(), async (peer) => {
    const result = await getJson(target(peer.url), { path: "/x?y=1", schema: Answer });
    assertEquals(result, { ok: true, value: { answer: 42 } });
    assertEquals(peer.requests.map((r) => r.target), ["/x?y=1"]);
  });
});

Deno.test("getJson classifies error statuses and quotes the Status message", async () => {
  await using(answering(), async (peer) => {
    const expected: [number, string][] = [
      [401, "unauthorized"],
      [403, "forbidden"],
      [404, "not-found"],
      [500, "server-error"],
      [503, "server-error"],
      [400, "bad-response"],
      [302, "bad-response"],
      [409, "bad-response"],
    ];
    for (const [status, kind] of expected) {
      const f = failure(
        await getJson(target(peer.url), { path: `/status/${status}`, schema: Answer }),
      );
      assertEquals([f.source, f.kind, f.status], ["apiserver", kind, status]);
      assert(f.message.startsWith(`GET ${peer.url}/status/${status}: ${status} `), f.message);
      assert(f.message.endsWith(`: answered ${status}`), f.message);
    }
  });
});

Deno.test("getJson refuses a body that is not the expected JSON", async () => {
  const bodies: Record<string, unknown> = {
    "/text": "<html>proxy login</html>",
    "/empty": "",
    "/wrong": { answer: "forty-two" },
  };
  await using(plainPeer((path) => ({ status: 200, body: bodies[path] })), async (peer) => {
    const messages: Record<string, string> = {};
    for (const path of Object.keys(bodies)) {
      const f = failure(await getJson(target(peer.url), { path, schema: Answer }));
      assertEquals(f.kind, "bad-response");
      messages[path] = f.message.slice(`GET ${peer.url}${path}: `.length);
    }
    assertEquals(messages, {
      "/text":
        'body is not JSON (content-type text/plain; charset=utf-8): "<html>proxy login</html>"',
      "/empty": 'body is not JSON (content-type text/plain; charset=utf-8): ""',
      "/wrong":
        'unexpected body: answer: expected number, received string: "{\\"answer\\":\\"forty-two\\"}"',
    });
  });
});

/**
 * A server that answers every request with `head` and `body` written as they are, then closes
 * the connection: what a peer that dies mid-answer, or a proxy that cuts it, leaves.
 */
async function cuttingServer(head: string, body: string) {
  const server = net.createServer((socket) => {
    socket.on("error", () => {});
    socket.once("data", () => socket.end(`${head}\r\n\r\n${body}`));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

Deno.test("a body cut short, by length or mid-chunk, fails at once; a cut JSON document too", async () => {
  const cases: [string, string, string, string][] = [
    [
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000",
      '{"kind":"PodList","items":[{"metadata"',
      "body cut short",
      'body cut short after 38 of 1000 bytes, the connection closed before its end: "{\\"kind',
    ],
    [
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked",
      '11\r\n{"kind":"PodList"\r\n',
      "body cut short",
      'body cut short after 17 bytes, the connection closed before its end: "{\\"kind',
    ],
    // Complete as HTTP, but the document itself ends early.
    [
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 17",
      '{"kind":"PodList"',
      "not JSON (application/json)",
      'body is not JSON (content-type application/json): "{\\"kind\\":\\"PodList\\""',
    ],
  ];
  for (const [head, body, problem, detail] of cases) {
    await using(cuttingServer(head, body), async (server) => {
      // A minute to answer: a failure that waited for the deadline would say "timeout".
      const f = failure(
        await getJson(target(server.url, { timeoutMs: 60_000 }), { path: "/", schema: Answer }),
      );
      assertEquals([f.kind, f.problem], ["bad-response", problem]);
      assert(f.message.startsWith(`GET ${server.url}/: ${detail}`), f.message);
    });
  }
});

Deno.test("getJson refuses a body larger than the cap", async () => {
  const big = { answer: 1, padding: "x".repeat(200_000) };
  await using(plainPeer(() => ({ status: 200, body: big })), async (peer) => {
    const f = failure(
      await getJson(target(peer.url, { maxBodyBytes: 100_000 }), { path: "/", schema: Answer }),
    );
    assertEquals(f.kind, "bad-response");
    assert(f.message.endsWith("body larger than 100000 bytes"), f.message);
    const whole = await getJson(target(peer.url), { path: "/", schema: Answer });
    assertEquals(whole, { ok: true, value: { answer: 1 } });
  });
});

Deno.test("getJson gives up on a peer that never answers", async () => {
  await using(answering(), async (peer) => {
    peer.setFault("hang");
    const f = failure(
      await getJson(target(peer.url, { timeoutMs: 200 }), { path: "/", schema: Answer }),
    );
    assertEquals(f.kind, "timeout");
    assert(f.message.endsWith("no complete answer within 200 ms"), f.message);
    assertEquals(peer.requestCount("/"), 1);
  });
});

Deno.test("getJson reports a closed port as unreachable, and asks it again once a connection to it is made", async () => {
  await using(answering(), async (peer) => {
    await peer.stopListening();
    // Pooled, as the API server's and the kubelet's clients are: the pool keeps what the peer
    // did with the last call.
    const pooled = target(peer.url, { connections: new ConnectionPool(3) });
    const get = () => getJson(pooled, { path: "/", schema: Answer });
    for (let i = 0; i < 2; i++) {
      // The second is refused to the probe before any request (see the next test).
      const f = failure(await get());
      assertEquals(f.kind, "unreachable");
      assert(f.message.includes("ECONNREFUSED"), f.message);
    }
    await peer.resumeListening();
    const accepted = peer.connections().accepted;
    assertEquals((await get()).ok, true);
    // The probe's connection, then the request's.
    assertEquals(peer.connections().accepted - accepted, 2);
    // Once the pool closed that connection, the next call makes one of its own, with no probe.
    assert(await allClosed(peer), "the pool kept a connection");
    assertEquals((await get()).ok, true);
    assertEquals(peer.connections().accepted - accepted, 3);
    assertEquals(peer.requestCount("/"), 2);

    // Calls made together after a refused one wait for one probe, not one each.
    await peer.stopListening();
    assertEquals(failure(await get()).kind, "unreachable");
    await peer.resumeListening();
    const before = peer.connections().accepted;
    const burst = await Promise.all(Array.from({ length: 6 }, get));
    assert(burst.every((answer) => answer.ok));
    const made = peer.connections().accepted - before;
    assert(made <= 4, `${made} connections: one probe, then at most the pool's 3`);
  });
});

Deno.test("GETs refused by a gone peer keep nothing alive (Deno's node:https would keep each)", async () => {
  const script = `
    import * as v from "valibot";
    import { ConnectionPool, getJson } from ${
    JSON.stringify(new URL("../../lib/sources/http.ts", import.meta.url).href)
  };
    import { createSimCa } from ${
    JSON.stringify(new URL("../../lib/sim/pki.ts", import.meta.url).href)
  };
    const ca = await createSimCa();
    const target = {
      source: "apiserver",
      baseUrl: "https://127.0.0.1:1",
      timeoutMs: 5000,
      tls: { verifyServer: true, caPem: ca.certPem },
      connections: new ConnectionPool(3),
    };
    const refused = async (n) => {
      for (let i = 0; i < n; i++) {
        const r = await getJson(target, { path: "/api/v1/pods", schema: v.unknown() });
        if (r.ok || r.failure.kind !== "unreachable") throw new Error(JSON.stringify(r));
      }
      gc();
      await new Promise((resolve) => setTimeout(resolve, 50));
      gc();
      return Deno.memoryUsage().heapUsed;
    };
    const before = await refused(20);
    const after = await refused(300);
    console.log(JSON.stringify({ before, after }));
  `;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--v8-flags=--expose-gc", script],
    cwd: new URL("../..", import.meta.url).pathname,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert(out.success, new TextDecoder().decode(out.stderr));
  const { before, after } = JSON.parse(new TextDecoder().decode(out.stdout));
  // Kept, each would hold about 20 KB of heap: 6 MB for 300.
  assert(after - before < 1_500_000, `${before} -> ${after} bytes of heap in use`);
});

Deno.test("getJson reaches an IPv6 loopback address", async () => {
  await using(plainPeer(() => ({ status: 200, body: { answer: 6 } }), "::1"), async (peer) => {
    assert(peer.url.startsWith("http://[::1]:"));
    assertEquals(await getJson(target(peer.url), { path: "/", schema: Answer }), {
      ok: true,
      value: { answer: 6 },
    });
  });
});

Deno.test("getJson over TLS: CA, server name, client certificate and bearer token", async () => {
  const { ca, nodeClient } = await simCluster();
  const serving = await ca.issueServerCert();
  const peer = await startSimPeer({
    tls: { ...serving, clientCaPem: ca.certPem },
    handle: () => ({ status: 200, body: { answer: 7 } }),
    failure: (fault) => ({ status: fault === "unauthorized" ? 401 : 503, body: fault }),
  });
  const get = (tls: TlsSettings, bearerToken?: string) =>
    getJson(target(peer.url, { tls }), { path: "/", schema: Answer, bearerToken });
  const client = { certPem: nodeClient.certPem, keyPem: nodeClient.keyPem };
  try {
    assertEquals(await get({ verifyServer: true, caPem: ca.certPem, ...client }), {
      ok: true,
      value: { answer: 7 },
    });
    assertEquals(peer.requests.at(-1)?.authenticatedAs, `cert:system:node:${NODE_NAME}`);

    // The kubelet's key file holds a SEC1 "EC PRIVATE KEY", not PKCS#8.
    const sec1 = sec1Key(nodeClient.keyPem);
    const viaSec1 = await get({ verifyServer: true, caPem: ca.certPem, ...client, keyPem: sec1 });
    assertEquals(viaSec1.ok, true);

    peer.acceptTokens(["t0ken"]);
    assertEquals((await get({ verifyServer: true, caPem: ca.certPem }, "t0ken")).ok, true);
    assertEquals(peer.requests.at(-1)?.authenticatedAs, "token:t0ken");
    assertEquals(
      failure(await get({ verifyServer: true, caPem: ca.certPem })).kind,
      "unauthorized",
    );

    const named = await get({
      verifyServer: true,
      caPem: ca.certPem,
      serverName: "localhost",
      ...client,
    });
    assertEquals(named.ok, true);
    const misnamed = failure(
      await get({ verifyServer: true, caPem: ca.certPem, serverName: "kubernetes", ...client }),
    );
    assertEquals(misnamed.kind, "unreachable");

    const stranger = await createSimCa("some-other-ca");
    const untrusted = failure(
      await get({ verifyServer: true, caPem: stranger.certPem, ...client }),
    );
    assertEquals(untrusted.kind, "unreachable");
    assertEquals((await get({ verifyServer: false, ...client })).ok, true);

    // A client certificate from another CA ends the handshake, as on a Go server.
    const foreign = await stranger.issueClientCert({ commonName: "intruder" });
    const refused = failure(await get({ verifyServer: true, caPem: ca.certPem, ...foreign }));
    assertEquals(refused.kind, "unreachable");
  } finally {
    await peer.close();
  }
});

/** Waits for the peer to see every connection closed; closing is asynchronous on its side. */
async function allClosed(peer: { connections(): { open: number } }): Promise<boolean> {
  for (let i = 0; i < 200 && peer.connections().open > 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return peer.connections().open === 0;
}

/** A peer over TLS that wants client certificates, and the settings of a client it accepts. */
async function tlsPeer(
  handle: SimPeerOptions["handle"],
): Promise<{ peer: SimPeer; tls: TlsSettings }> {
  const { ca, nodeClient } = await simCluster();
  const serving = await ca.issueServerCert();
  const peer = await startSimPeer({
    tls: { ...serving, clientCaPem: ca.certPem },
    handle,
    failure: () => ({ status: 503, body: "fault" }),
  });
  const tls = {
    verifyServer: true,
    caPem: ca.certPem,
    certPem: nodeClient.certPem,
    keyPem: nodeClient.keyPem,
  };
  return { peer, tls };
}

Deno.test("a connection pool reuses connections while calls overlap and keeps none after", async () => {
  const { peer, tls } = await tlsPeer((request) =>
    request.path === "/missing"
      ? { status: 404, body: { kind: "Status", message: "gone", code: 404 } }
      : { status: 200, body: { answer: 7 } }
  );
  const pooled = target(peer.url, { connections: new ConnectionPool(3), tls });
  const burst = (count: number) =>
    Promise.all(
      Array.from({ length: count }, (_, i) =>
        getJson(pooled, { path: i % 5 === 4 ? "/missing" : "/", schema: Answer })),
    );
  try {
    const answers = await burst(30);
    assertEquals(answers.filter((a) => a.ok).length, 24);
    assertEquals(answers.filter((a) => !a.ok && a.failure.kind === "not-found").length, 6);
    // Every call authenticated with the client certificate, over at most 3 connections.
    assertEquals(peer.requests.every((r) => r.authenticatedAs?.startsWith("cert:")), true);
    assert(peer.connections().accepted <= 3, `${peer.connections().accepted} connections`);
    assert(await allClosed(peer), "a connection stayed open after the last answer");

    // The next burst opens connections anew.
    const before = peer.connections().accepted;
    assertEquals((await burst(4)).every((a) => a.ok), true);
    assert(peer.connections().accepted > before);
    assert(await allClosed(peer), "a connection stayed open after the last answer");

    // A peer that disappears mid-burst leaves nothing behind; the pool works once it is back.
    peer.setFault("hang");
    const hung = getJson({ ...pooled, timeoutMs: 200 }, { path: "/", schema: Answer });
    assertEquals(failure(await hung).kind, "timeout");
    peer.setFault("none");
    await peer.stopListening();
    assertEquals(failure((await burst(1))[0]).kind, "unreachable");
    await peer.resumeListening();
    assertEquals((await burst(4)).every((a) => a.ok), true);
    assert(await allClosed(peer), "a connection stayed open after the last answer");
  } finally {
    await peer.close();
  }
});

Deno.test("a connection pool with keepIdleMs keeps its connection between calls, and closes it once idle that long", async () => {
  const { peer, tls } = await tlsPeer(() => ({ status: 200, body: { answer: 7 } }));
  const kept = target(peer.url, { connections: new ConnectionPool(1, { keepIdleMs: 300 }), tls });
  try {
    for (let i = 0; i < 3; i++) {
      assert((await getJson(kept, { path: "/", schema: Answer })).ok);
      // Handed back to the pool, not closed, after the answer.
      await new Promise((resolve) => setTimeout(resolve, 10));
      assertEquals(peer.connections(), { accepted: 1, open: 1 });
    }
    assert(await allClosed(peer), "the idle connection stayed open");
    assert((await getJson(kept, { path: "/", schema: Answer })).ok);
    assertEquals(peer.connections().accepted, 2);
  } finally {
    await peer.close();
  }
});
