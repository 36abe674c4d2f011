/**
 * The admin endpoint against clients that hold its connections, over TCP and the unix socket
 * alike: connections beyond the bound are closed at once; one that sends nothing, withholds a body,
 * does not take its answer or leaves the connection open after it is closed at the client
 * timeout, and so is one that dribbles its request's head, however steadily; a request under way
 * (a pass it waits for) is never cut; one request a connection. The timers are the test's
 * wherever the point is when a connection closes.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { serveConnections } from "../../lib/admin/connections.ts";
import { realTimers } from "../../lib/util/timers.ts";
import { LogCapture } from "../helpers/log_capture.ts";
import { ManualTimers } from "../helpers/manual_timers.ts";
import { until } from "../helpers/until.ts";
import { readAll, type ServedFixture, withServedDaemon, writeAll } from "./harness.ts";

const LIMITS = { maxConnections: 32, clientTimeoutMs: 5_000 };
const TOKEN = "s3cr3t-admin-token-0123456789abcdef";
const VIAS = ["tcp", "unix"] as const;

function served(
  via: typeof VIAS[number],
  fn: (f: ServedFixture, timers: ManualTimers) => Promise<void>,
) {
  const timers = new ManualTimers();
  return withServedDaemon({
    via,
    prepare: (f) => f.writeToken(TOKEN),
    serve: { limits: LIMITS, timers },
  }, (f) => fn(f, timers));
}

const encode = (text: string) => new TextEncoder().encode(text);

/** Reads one answer off a connection, not waiting for its end: the head and a Content-Length
 *  body. */
async function readAnswer(
  conn: Deno.Conn,
): Promise<{ status: number; connection?: string; body: string }> {
  let text = "";
  const buffer = new Uint8Array(16 * 1024);
  for (;;) {
    const end = text.indexOf("\r\n\r\n");
    const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, end));
    if (end >= 0 && length && text.length >= end + 4 + Number(length[1])) {
      return {
        status: Number(text.split(" ")[1]),
        connection: /\r\nconnection: *([^\r]*)/i.exec(text.slice(0, end))?.[1],
        body: text.slice(end + 4, end + 4 + Number(length[1])),
      };
    }
    const n = await conn.read(buffer);
    if (n === null) {
      throw new Error(`the connection ended before a whole answer: ${JSON.stringify(text)}`);
    }
    text += new TextDecoder().decode(buffer.subarray(0, n));
  }
}

/**
 * Sends `POST /v1/reconcile` with the token, `rest` ending its head (and starting its body), and
 * returns once the server has armed the request's own wait (for its body). Sent a moment after
 * the connection's wait for a request was armed, so that the two are told apart.
 */
async function sendReconcile(conn: Deno.Conn, timers: ManualTimers, rest: string) {
  await timers.advance(1);
  await writeAll(
    conn,
    encode(
      `POST /v1/reconcile HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${TOKEN}\r\n${rest}`,
    ),
  );
  await until("the request's wait armed", () => timers.armed[0] === LIMITS.clientTimeoutMs);
}

/** What the server sent until it closed the connection; an error if it does not close it. */
async function ended(conn: Deno.Conn): Promise<string> {
  let sent: string | undefined;
  readAll(conn).then((bytes) => sent = new TextDecoder().decode(bytes));
  await until("the server closed the connection", () => sent !== undefined);
  return sent!;
}

for (const via of VIAS) {
  Deno.test(`${via}: of 300 connections that send nothing, those beyond the bound are closed at once, the others at the client timeout`, async () => {
    await served(via, async (f, timers) => {
      const conns = await Promise.all(Array.from({ length: 300 }, () => f.connect()));
      try {
        let closed = 0;
        for (const conn of conns) readAll(conn).then(() => closed++);
        const beyond = conns.length - LIMITS.maxConnections;
        await until("the connections beyond the bound closed", () => closed >= beyond);
        assertEquals(closed, beyond);
        // Each connection kept waits for its request with the client timeout armed.
        assertEquals(timers.armed, Array(LIMITS.maxConnections).fill(LIMITS.clientTimeoutMs));
        await timers.advance(LIMITS.clientTimeoutMs);
        await until("every connection closed", () => closed === conns.length);
      } finally {
        for (const conn of conns) conn.close();
      }
      assertEquals((await f.request("/healthz")).status, 200);
      const full = f.log.find("admin: connection limit reached; connections beyond it are closed");
      assertEquals(full.map((l) => [l.level, l.limit]), [["warn", LIMITS.maxConnections]]);
      assertEquals(f.log.find("admin: below the connection limit again").length, 1);
      const idle = f.log.find("admin: connection closed").filter((l) => l.why === "no request");
      assertEquals(idle.length, LIMITS.maxConnections);
    });
  });

  Deno.test(`${via}: a client that dribbles its request's head is cut off at the client timeout, however steadily it sends`, async () => {
    // Real timers, short: a byte every 20 ms keeps the connection busy, never idle.
    const limits = { maxConnections: 4, clientTimeoutMs: 300 };
    await withServedDaemon({ via, serve: { limits } }, async (f) => {
      const conn = await f.connect();
      const head = encode(
        `GET /healthz HTTP/1.1\r\nHost: localhost\r\n${"X-Slow: 1\r\n".repeat(150)}`,
      );
      let cut = false;
      const reading = readAll(conn).then((bytes) => {
        cut = true;
        return new TextDecoder().decode(bytes);
      });
      let sent = 0;
      try {
        // 1,700-odd bytes at one every 20 ms: half a minute unless cut, and never the whole head.
        for (; sent < head.length && !cut; sent++) {
          await conn.write(head.subarray(sent, sent + 1));
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      } catch {
        // Writing into a connection the server has closed.
      }
      try {
        assert(sent < head.length, "the whole head went through");
        assertEquals(await reading, "");
      } finally {
        conn.close();
      }
      const line = f.log.find("admin: connection closed")[0];
      assertEquals([line.level, line.why], ["debug", "no request"]);
    });
  });
}

Deno.test("one request a connection, answered with Connection: close; a request under way is never cut, however long its pass takes; a client that leaves the connection open is", async () => {
  await served("tcp", async (f, timers) => {
    // A pass under way holds the next one, which the request waits for.
    let release!: () => void;
    const held = f.daemon.between(() => new Promise<void>((resolve) => release = resolve));
    const conn = await f.connect();
    try {
      await sendReconcile(conn, timers, "Content-Length: 0\r\n\r\n");
      await timers.advance(LIMITS.clientTimeoutMs * 10);
      release();
      await held;
      const reconciled = await readAnswer(conn);
      assertEquals([reconciled.status, reconciled.connection], [200, "close"]);
      assertEquals(JSON.parse(reconciled.body).complete, true);
      // The client keeps its side open.
      assertEquals(f.log.find("admin: connection closed"), []);
      await timers.advance(LIMITS.clientTimeoutMs);
      await until("the connection closed", () => f.log.find("admin: connection closed").length > 0);
      assertEquals(f.log.find("admin: connection closed").map((l) => l.why), ["left open"]);
    } finally {
      release();
      conn.close();
    }
  });
});

Deno.test("a request whose body does not come is cut off at the client timeout", async () => {
  await served("unix", async (f, timers) => {
    const conn = await f.connect();
    try {
      await sendReconcile(conn, timers, "Content-Length: 100\r\n\r\n{}");
      await timers.advance(LIMITS.clientTimeoutMs);
      assertEquals(await ended(conn), "");
      assertEquals(f.daemon.lastReport, undefined, "no pass was run");
      const line = f.log.find("admin: connection closed")[0];
      assertEquals(line.why, "no request body");
    } finally {
      conn.close();
    }
  });
});

Deno.test("a second request on a connection is not answered: the first answer said it closes", async () => {
  await served("unix", async (f) => {
    const conn = await f.connect();
    try {
      const get = "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n";
      await writeAll(conn, encode(get + get));
      const answer = await ended(conn);
      assertEquals(answer.match(/^HTTP\/1\.1 /gm)?.length, 1, answer);
      assertEquals(f.log.find("admin request").length, 1);
    } finally {
      conn.close();
    }
  });
});

Deno.test("a client that does not take its answer is cut off at the client timeout", async () => {
  // Real timers, short; an answer far larger than the socket buffers hold, never read.
  const log = new LogCapture();
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const served = serveConnections({
    listener,
    fetch: () => Promise.resolve(new Response(new Uint8Array(32 * 1024 * 1024))),
    limits: { maxConnections: 4, clientTimeoutMs: 300 },
    timers: realTimers,
    log: log.logger,
  });
  try {
    const conn = await Deno.connect({
      hostname: "127.0.0.1",
      port: (listener.addr as Deno.NetAddr).port,
    });
    try {
      await writeAll(conn, encode("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"));
      await until("the connection closed", () => log.find("admin: connection closed").length > 0);
      assertEquals(log.find("admin: connection closed").map((l) => l.why), ["answer not taken"]);
    } finally {
      conn.close();
    }
  } finally {
    await served.close();
  }
});
