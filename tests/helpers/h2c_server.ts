/**
 * A raw HTTP/2 server without TLS on a unix socket, for answers no real gRPC server would give:
 * each test says what the server does with a stream. Sessions are destroyed (GOAWAY) on close.
 */
import http2 from "node:http2";

export type StreamHandler = (
  stream: http2.ServerHttp2Stream,
  body: Uint8Array,
  headers: http2.IncomingHttpHeaders,
) => void;

export interface H2cServer {
  socketPath: string;
  /** How many streams (calls) arrived. */
  streams(): number;
  /** Sends every open session a GOAWAY and drops it; the server keeps listening. */
  dropSessions(): void;
  close(): Promise<void>;
}

export async function startH2cServer(
  socketPath: string,
  handle: StreamHandler,
): Promise<H2cServer> {
  const server = http2.createServer();
  const sessions = new Set<http2.ServerHttp2Session>();
  let streams = 0;
  server.on("session", (session) => {
    sessions.add(session);
    session.on("error", () => {});
    session.on("close", () => sessions.delete(session));
  });
  server.on("stream", (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => {
    streams++;
    stream.on("error", () => {});
    const chunks: Uint8Array[] = [];
    stream.on("data", (chunk: Uint8Array) => chunks.push(chunk));
    stream.on("end", () => handle(stream, concat(chunks), headers));
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  const dropSessions = () => {
    for (const session of sessions) session.destroy();
  };
  return {
    socketPath,
    streams: () => streams,
    dropSessions,
    close: () => {
      dropSessions();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** gRPC's length prefix: a compression flag and a 4-byte big-endian length. */
export function grpcFrame(message: Uint8Array, compressed = false): Uint8Array {
  const framed = new Uint8Array(5 + message.length);
  framed[0] = compressed ? 1 : 0;
  new DataView(framed.buffer).setUint32(1, message.length);
  framed.set(message, 5);
  return framed;
}

/** A successful unary answer: headers, one message, then grpc-status 0 in the trailers. */
export function answerOk(stream: http2.ServerHttp2Stream, message: Uint8Array): void {
  stream.respond({ ":status": 200, "content-type": "application/grpc" }, {
    waitForTrailers: true,
  });
  stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
  stream.end(grpcFrame(message));
}

function concat(chunks: Uint8Array[]): Uint8Array {
  const all = new Uint8Array(chunks.reduce((sum, chunk) => sum + chunk.length, 0));
  let offset = 0;
  for (const chunk of chunks) {
    all.set(chunk, offset);
    offset += chunk.length;
  }
  return all;
}
