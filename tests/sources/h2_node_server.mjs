// An independent HTTP/2 server for tests/sources/h2_interop_test.ts: Node's http2 (nghttp2), over
// TLS with client certificates, two streams a connection at most, a tiny window for what it
// receives, every frame padded, and HPACK as nghttp2 does it (Huffman, the dynamic table).
// Its argument: a directory with server.pem, server-key.pem and ca.pem. It prints its port.
import fs from "node:fs";
import http2 from "node:http2";
import path from "node:path";

const dir = process.argv[2];
const read = (name) => fs.readFileSync(path.join(dir, name));
const { NGHTTP2_NO_ERROR, PADDING_STRATEGY_MAX } = http2.constants;

const server = http2.createSecureServer({
  key: read("server-key.pem"),
  cert: read("server.pem"),
  ca: read("ca.pem"),
  requestCert: true,
  rejectUnauthorized: true,
  settings: { maxConcurrentStreams: 2, initialWindowSize: 16 },
  paddingStrategy: PADDING_STRATEGY_MAX,
});

/** Watches left open, by session, so that a GOAWAY can end the older ones. */
const open = new Map();

const event = (object) => JSON.stringify({ type: "ADDED", object }) + "\n";
const head = (status, type = "application/json") => ({
  ":status": status,
  "content-type": type,
  "x-watch-note": "the same long value on every response, for the dynamic table",
});

server.on("stream", (stream, headers) => {
  // Streams reset or refused are what the tests ask for, not a reason to stop.
  stream.on("error", () => {});
  const url = new URL(headers[":path"], "https://h2.test");
  const session = stream.session;
  const echo = {
    method: headers[":method"],
    authority: headers[":authority"],
    path: headers[":path"],
    authorization: headers["authorization"] ?? null,
    accept: headers["accept"],
  };
  switch (url.pathname) {
    case "/watch": {
      // More than a stream's and a connection's window: only WINDOW_UPDATEs let it through.
      const events = Number(url.searchParams.get("events") ?? 1);
      const bytes = Number(url.searchParams.get("bytes") ?? 10);
      stream.respond(head(200));
      for (let n = 0; n < events; n++) stream.write(event({ n, pad: "x".repeat(bytes), echo }));
      stream.end();
      return;
    }
    case "/hang": {
      stream.respond(head(200));
      stream.write(event({ n: 0, echo }));
      if (!open.has(session)) open.set(session, new Set());
      open.get(session).add(stream);
      stream.on("close", () => open.get(session)?.delete(stream));
      return;
    }
    case "/reset":
      stream.respond(head(200));
      // destroy, not close: close() ends the stream (END_STREAM) before its RST_STREAM.
      stream.write(event({ n: 0 }), () => stream.destroy(new Error("reset as asked")));
      return;
    case "/goaway": {
      // Streams up to the one before this go on, and end cleanly after one more event.
      session.goaway(NGHTTP2_NO_ERROR, stream.id - 2);
      for (const older of open.get(session) ?? []) older.end(event({ n: 1, after: "goaway" }));
      return;
    }
    case "/ping":
      session.ping(Buffer.from("ckpt-h2!"), (error) => {
        stream.respond(head(200));
        stream.end(event({ pinged: !error }));
      });
      return;
    case "/status": {
      const code = Number(url.searchParams.get("code"));
      stream.respond(head(code));
      stream.end(JSON.stringify({
        kind: "Status",
        apiVersion: "v1",
        status: "Failure",
        message: `status ${code} as asked`,
        code,
      }));
      return;
    }
    case "/html":
      stream.respond(head(200, "text/html"));
      stream.end("<html><body>a proxy's page</body></html>");
      return;
    default:
      stream.respond({ ":status": 404 });
      stream.end();
  }
});

server.listen(0, "127.0.0.1", () => console.log(server.address().port));
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
