/**
 * A raw HTTP/2 server without TLS (h2c) on a unix socket, and gRPC's unary answers: the simulated
 * runtime serves CRI with it, and tests use it for answers no real gRPC server would give. The
 * caller says what the server does with each call. Sessions are destroyed (GOAWAY) on close.
 */
import http2 from "node:http2";
import { concatBytes } from "../bytes.ts";
import { frame } from "../sources/grpc_unary.ts";

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
    stream.on("end", () => handle(stream, concatBytes(chunks), headers));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(socketPath, () => {
      server.off("error", reject);
      resolve();
    });
  });
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

/** A successful unary answer: headers, one message, then grpc-status 0 in the trailers. */
export function answerOk(stream: http2.ServerHttp2Stream, message: Uint8Array): void {
  stream.respond({ ":status": 200, "content-type": "application/grpc" }, {
    waitForTrailers: true,
  });
  stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
  stream.end(frame(message));
}

/** A failed unary answer the way gRPC servers send one without a message: trailers only. */
export function answerError(stream: http2.ServerHttp2Stream, code: number, details: string): void {
  stream.respond({
    ":status": 200,
    "content-type": "application/grpc",
    "grpc-status": String(code),
    "grpc-message": encodeURIComponent(details),
  }, { endStream: true });
}
