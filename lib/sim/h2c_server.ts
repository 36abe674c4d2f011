/**
 * gRPC's unary calls served over HTTP/2 without TLS (h2c) on a unix socket, with Deno.serve
 * (hyper), which takes HTTP/2 with prior knowledge on a plain socket. The simulated runtime
 * serves CRI with it, and tests use it for answers no real gRPC server would give.
 *
 * Not node:http2: in Deno 2.9 a GOAWAY on one of its sessions, sent or received, can abort or
 * segfault the whole process (denoland/deno#36788), and a test run or a demo is one process.
 *
 * One deviation from gRPC: Deno.serve cannot send HTTP trailers, so a successful answer ends
 * after its message, without the `grpc-status: 0` trailer a gRPC server sends. The agent's client
 * cannot read trailers either (lib/sources/grpc_unary.ts) and is tested against real containerd;
 * errors are sent exactly as gRPC servers send them, in the headers ("trailers-only").
 */
import { frame, GrpcStatus } from "../sources/grpc_unary.ts";

export interface UnaryCall {
  /** `/package.Service/Method`. */
  path: string;
  headers: Headers;
  /** The request body as sent: a length-prefixed message, if the client is well-behaved. */
  body: Uint8Array;
  /** Aborted when the server closes: a handler that holds a call back must answer then. */
  closing: AbortSignal;
}

export type UnaryHandler = (call: UnaryCall) => Response | Promise<Response>;

export interface H2cServer {
  socketPath: string;
  /** Answers what it still holds, sends every connection a GOAWAY, removes the socket. */
  close(): Promise<void>;
}

export function startH2cServer(socketPath: string, handle: UnaryHandler): Promise<H2cServer> {
  const closing = new AbortController();
  return new Promise((resolve, reject) => {
    let server: Deno.HttpServer<Deno.UnixAddr>;
    try {
      server = Deno.serve({
        path: socketPath,
        signal: closing.signal,
        onListen: () =>
          resolve({
            socketPath,
            close: async () => {
              closing.abort();
              await server.finished;
              await Deno.remove(socketPath).catch((error) => {
                if (!(error instanceof Deno.errors.NotFound)) throw error;
              });
            },
          }),
        onError: () => grpcError(GrpcStatus.INTERNAL, "the simulated server failed"),
      }, async (request) =>
        await handle({
          path: new URL(request.url).pathname,
          headers: request.headers,
          body: new Uint8Array(await request.arrayBuffer()),
          closing: closing.signal,
        }));
    } catch (error) {
      reject(error);
    }
  });
}

/** A successful unary answer: one message. */
export function grpcAnswer(message: Uint8Array): Response {
  return new Response(frame(message), { headers: { "content-type": "application/grpc" } });
}

/** A failed unary answer the way gRPC servers send one without a message: trailers only. */
export function grpcError(code: number, details: string): Response {
  return new Response(null, {
    headers: {
      "content-type": "application/grpc",
      "grpc-status": String(code),
      "grpc-message": encodeURIComponent(details),
    },
  });
}

/** Resolves when the server closes: for a handler that never answers of its own accord. */
export function untilClosed(call: UnaryCall): Promise<void> {
  return new Promise((resolve) => {
    if (call.closing.aborted) resolve();
    call.closing.addEventListener("abort", () => resolve(), { once: true });
  });
}
