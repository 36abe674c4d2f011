/**
 * Our HTTP/2 client against servers that misbehave, written frame by frame over real TLS on
 * loopback: one that goes silent after its answer's head (the PINGs find it, on a time the test
 * moves), one whose connection is cut in the middle of a frame, one whose header block HPACK
 * cannot decode.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { createSimCa } from "../../lib/sim/pki.ts";
import {
  ErrorCode,
  Flag,
  frame,
  FrameType,
  GOAWAY_WRITE_MS,
  H2Connection,
  PING_TIMEOUT_MS,
  PREFACE,
  READ_IDLE_MS,
  Setting,
  settingsPayload,
  uint32Payload,
} from "../../lib/sources/h2/connection.ts";
import { encodeHeaders } from "../../lib/sources/h2/hpack.ts";
import { watchClients } from "../../lib/sources/watch_stream.ts";
import { ManualTimers } from "../helpers/manual_timers.ts";
import { until } from "../helpers/until.ts";
import { type SeenWatch, targetFor, watchOf } from "./h2_watch.ts";

interface ServerOptions {
  answerPings?: boolean;
  /** The server's SETTINGS frame; unset: one without settings. */
  settings?: Uint8Array;
}

interface Frame {
  type: number;
  flags: number;
  streamId: number;
  payload: Uint8Array;
}

/** What the server does once a request's HEADERS came: frames to write, and whether to cut. */
type Answer = (conn: Deno.Conn, streamId: number) => Promise<void>;

const OK_HEAD = encodeHeaders([[":status", "200"], ["content-type", "application/json"]]);

async function withRawServer(
  answer: Answer,
  options: ServerOptions,
  fn: (
    port: number,
    tls: { caPem: string; certPem: string; keyPem: string },
    received: Frame[],
  ) => Promise<void>,
) {
  const ca = await createSimCa();
  const serving = await ca.issueServerCert("h2-raw");
  const client = await ca.issueClientCert({ commonName: "system:node:node-1" });
  const listener = Deno.listenTls({
    hostname: "127.0.0.1",
    port: 0,
    cert: serving.certPem,
    key: serving.keyPem,
    alpnProtocols: ["h2"],
  });
  const received: Frame[] = [];
  const conns: Deno.Conn[] = [];
  const serving_ = (async () => {
    for await (const conn of listener) {
      conns.push(conn);
      void serve(conn, answer, options, received).catch(() => {});
    }
  })();
  try {
    await fn(listener.addr.port, { caPem: ca.certPem, ...client }, received);
  } finally {
    listener.close();
    for (const conn of conns) {
      try {
        conn.close();
      } catch {
        // Closed by the test already.
      }
    }
    await serving_;
  }
}

async function serve(
  conn: Deno.Conn,
  answer: Answer,
  options: ServerOptions,
  received: Frame[],
) {
  await conn.write(options.settings ?? frame(FrameType.SETTINGS, 0, 0));
  let buffered = new Uint8Array();
  let prefaceSeen = false;
  const chunk = new Uint8Array(65_536);
  for (;;) {
    const n = await conn.read(chunk);
    if (n === null) return;
    const joined = new Uint8Array(buffered.length + n);
    joined.set(buffered);
    joined.set(chunk.subarray(0, n), buffered.length);
    buffered = joined;
    if (!prefaceSeen) {
      if (buffered.length < PREFACE.length) continue;
      buffered = buffered.slice(PREFACE.length);
      prefaceSeen = true;
    }
    while (buffered.length >= 9) {
      const length = (buffered[0] << 16) | (buffered[1] << 8) | buffered[2];
      if (buffered.length < 9 + length) break;
      const view = new DataView(buffered.buffer, buffered.byteOffset);
      const f: Frame = {
        type: buffered[3],
        flags: buffered[4],
        streamId: view.getUint32(5) & 0x7fffffff,
        payload: buffered.slice(9, 9 + length),
      };
      buffered = buffered.slice(9 + length);
      received.push(f);
      if (f.type === FrameType.HEADERS) await answer(conn, f.streamId);
      if (f.type === FrameType.PING && !(f.flags & Flag.ACK) && options.answerPings) {
        await conn.write(frame(FrameType.PING, Flag.ACK, 0, f.payload));
      }
    }
  }
}

/** Answers the head of a watch, then nothing more. */
const headOnly: Answer = async (conn, id) => {
  await conn.write(frame(FrameType.HEADERS, Flag.END_HEADERS, id, OK_HEAD));
};

/** Not a type guard: the test goes on to see it end. */
const stillOpen = (watch: SeenWatch): boolean => watch.ended === undefined;

const pings = (received: Frame[]) =>
  received.filter((f) => f.type === FrameType.PING && !(f.flags & Flag.ACK)).length;

/** One watch open on a server that answers its head only, on time the test moves. */
async function openOnManualTime(
  answerPings: boolean,
  fn: (watch: SeenWatch, timers: ManualTimers, received: Frame[]) => Promise<void>,
) {
  await withRawServer(headOnly, { answerPings }, async (port, tls, received) => {
    const timers = new ManualTimers();
    const target = targetFor(port, tls);
    const clients = watchClients(target, { timers })!;
    try {
      const watch = watchOf(target, clients, "/watch");
      await until("the watch open", () => watch.opened);
      await fn(watch, timers, received);
    } finally {
      clients.close();
    }
  });
}

Deno.test("a server silent after its answer's head is sent a PING at 30 s, and dropped 15 s later", async () => {
  await openOnManualTime(false, async (watch, timers, received) => {
    await timers.advance(READ_IDLE_MS - 1);
    assertEquals(pings(received), 0);
    assert(timers.armed.includes(1), `the silence is checked next at 30 s: ${timers.armed}`);
    await timers.advance(1);
    await until("the server got a PING", () => pings(received) === 1);
    await timers.advance(PING_TIMEOUT_MS - 1);
    assert(stillOpen(watch));
    await timers.advance(1);
    await until("the watch ended", () => watch.ended !== undefined);
    assertEquals(watch.ended?.failure?.problem, "body cut short");
    const message = watch.ended?.failure?.message ?? "";
    assert(message.includes("no answer to a PING"), message);
  });
});

Deno.test("a server that answers the PING keeps its connection; the next comes 30 s after", async () => {
  await openOnManualTime(true, async (watch, timers, received) => {
    await timers.advance(READ_IDLE_MS);
    await until("the answer read", () => timers.armed.includes(READ_IDLE_MS));
    await timers.advance(PING_TIMEOUT_MS);
    assert(stillOpen(watch));
    await timers.advance(READ_IDLE_MS - PING_TIMEOUT_MS);
    await until("a second PING", () => pings(received) === 2);
    assert(stillOpen(watch));
  });
});

/** One watch against a server that answers so, until it ended. */
async function endedWatch(
  answer: Answer,
  fn: (watch: SeenWatch, received: Frame[]) => Promise<void> | void,
) {
  await withRawServer(answer, {}, async (port, tls, received) => {
    const target = targetFor(port, tls);
    const clients = watchClients(target)!;
    try {
      const watch = watchOf(target, clients, "/watch");
      await until("the watch ended", () => watch.ended !== undefined);
      await fn(watch, received);
    } finally {
      clients.close();
    }
  });
}

Deno.test("a connection cut in the middle of a DATA frame cuts the watch short, saying so", async () => {
  const cutInData: Answer = async (conn, id) => {
    await conn.write(frame(FrameType.HEADERS, Flag.END_HEADERS, id, OK_HEAD));
    const data = frame(FrameType.DATA, 0, id, new TextEncoder().encode('{"type":"ADDED","obj'));
    await conn.write(data.subarray(0, data.length - 5));
    conn.close();
  };
  await endedWatch(cutInData, (watch) => {
    assert(watch.opened);
    assertEquals(watch.ended?.failure?.kind, "bad-response");
    assertEquals(watch.ended?.failure?.problem, "body cut short");
    const message = watch.ended?.failure?.message ?? "";
    assert(message.includes("connection closed by the server"), message);
  });
});

Deno.test("a connection cut in the middle of the answer's head: unreachable, never nothing", async () => {
  const cutInHead: Answer = async (conn, id) => {
    const head = frame(FrameType.HEADERS, Flag.END_HEADERS, id, OK_HEAD);
    await conn.write(head.subarray(0, 12));
    conn.close();
  };
  await endedWatch(cutInHead, (watch) => {
    assert(!watch.opened);
    assertEquals(watch.ended?.failure?.kind, "unreachable");
  });
});

Deno.test("a head HPACK cannot decode ends the connection with GOAWAY COMPRESSION_ERROR; its watches fail", async () => {
  // Index 0 is no field (RFC 7541 §6.1).
  const badHead: Answer = async (conn, id) => {
    await conn.write(frame(FrameType.HEADERS, Flag.END_HEADERS, id, new Uint8Array([0x80])));
  };
  await endedWatch(badHead, async (watch, received) => {
    assertEquals(watch.ended?.failure?.kind, "unreachable");
    await until("the GOAWAY came", () => received.some((f) => f.type === FrameType.GOAWAY));
    const goAway = received.find((f) => f.type === FrameType.GOAWAY)!;
    assertEquals(goAway.payload.subarray(4, 8), uint32Payload(ErrorCode.COMPRESSION_ERROR));
  });
});

Deno.test("a server that sends its SETTINGS and then nothing: the watch times out, as a GET's would", async () => {
  await withRawServer(() => Promise.resolve(), {}, async (port, tls) => {
    const target = { ...targetFor(port, tls), timeoutMs: 300 };
    const clients = watchClients(target)!;
    try {
      const watch = watchOf(target, clients, "/watch");
      await until("the watch ended", () => watch.ended !== undefined);
      assert(!watch.opened);
      assertEquals(watch.ended?.failure?.kind, "timeout");
    } finally {
      clients.close();
    }
  });
});

Deno.test("a head split over HEADERS and CONTINUATION, and padded DATA: the watch reads through", async () => {
  const split: Answer = async (conn, id) => {
    await conn.write(frame(FrameType.HEADERS, 0, id, OK_HEAD.subarray(0, 3)));
    await conn.write(frame(FrameType.CONTINUATION, Flag.END_HEADERS, id, OK_HEAD.subarray(3)));
    const event = new TextEncoder().encode('{"type":"ADDED","object":{"n":1}}\n');
    const padded = new Uint8Array(1 + event.length + 40);
    padded[0] = 40;
    padded.set(event, 1);
    await conn.write(frame(FrameType.DATA, Flag.PADDED | Flag.END_STREAM, id, padded));
  };
  await endedWatch(split, (watch) => {
    assert(watch.opened);
    assertEquals(watch.events.map((e) => e.object), [{ n: 1 }]);
    assertEquals(watch.ended, {});
  });
});

Deno.test("a server that allows no streams: the watch fails, and no connection after connection is made", async () => {
  const zero = frame(
    FrameType.SETTINGS,
    0,
    0,
    settingsPayload([[Setting.MAX_CONCURRENT_STREAMS, 0]]),
  );
  await withRawServer(() => Promise.resolve(), { settings: zero }, async (port, tls) => {
    const target = targetFor(port, tls);
    const clients = watchClients(target)!;
    try {
      const watch = watchOf(target, clients, "/watch");
      await until("the watch ended", () => watch.ended !== undefined);
      assertEquals(watch.ended?.failure?.kind, "unreachable");
      const message = watch.ended?.failure?.message ?? "";
      assert(message.includes("allows no streams"), message);
      assertEquals(clients.size, 1);
    } finally {
      clients.close();
    }
  });
});

/** A real connection whose every write takes at most `bytes` (a full socket buffer does so), or
 *  with `bytes` 0 never ends (a peer that stopped reading); `closed` says whether it was closed. */
function shortWrites(conn: Deno.TlsConn, bytes: number): Deno.TlsConn & { closed: boolean } {
  let closed = false;
  return new Proxy(conn as Deno.TlsConn & { closed: boolean }, {
    get(target, key) {
      if (key === "closed") return closed;
      if (key === "close") {
        return () => {
          closed = true;
          target.close();
        };
      }
      if (key === "write") {
        return (data: Uint8Array) =>
          bytes === 0 ? new Promise<number>(() => {}) : target.write(data.subarray(0, bytes));
      }
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

async function connectH2(port: number, tls: { caPem: string; certPem: string; keyPem: string }) {
  const conn = await Deno.connectTls({
    hostname: "127.0.0.1",
    port,
    alpnProtocols: ["h2"],
    caCerts: [tls.caPem],
    cert: tls.certPem,
    key: tls.keyPem,
  });
  await conn.handshake();
  return conn;
}

const noEvents = { ready() {}, changed() {} };

Deno.test("closed while its first frames are still being written in short writes: every frame arrives whole, then the GOAWAY", async () => {
  await withRawServer(() => Promise.resolve(), {}, async (port, tls, received) => {
    const conn = await connectH2(port, tls);
    const connection = new H2Connection(shortWrites(conn, 7), noEvents);
    connection.close("done");
    await until("the GOAWAY received", () => received.some((f) => f.type === FrameType.GOAWAY));
    assertEquals(received.map((f) => f.type), [
      FrameType.SETTINGS,
      FrameType.WINDOW_UPDATE,
      FrameType.GOAWAY,
    ]);
    assertEquals(received[2].payload, uint32Payload(0, ErrorCode.NO_ERROR));
  });
});

Deno.test("closed while a write never ends (the peer reads nothing): the connection is closed after 5 s all the same", async () => {
  await withRawServer(() => Promise.resolve(), {}, async (port, tls) => {
    const conn = await connectH2(port, tls);
    const timers = new ManualTimers();
    const hanging = shortWrites(conn, 0);
    new H2Connection(hanging, noEvents, timers).close("done");
    await timers.advance(GOAWAY_WRITE_MS - 1);
    assert(!hanging.closed, "still open before 5 s");
    await timers.advance(1);
    assert(hanging.closed, "closed at 5 s");
  });
});
