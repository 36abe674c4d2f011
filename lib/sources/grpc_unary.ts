/**
 * Unary gRPC calls over HTTP/2 on a unix socket, on Deno's own fetch (hyper) rather than
 * node:http2: Deno's node:http2 aborts or segfaults the whole process when a server's GOAWAY
 * meets a session that has run a few calls (denoland/deno#36788), which a runtime restart does.
 *
 * Wire format: gRPC over HTTP/2 (grpc/grpc, doc/PROTOCOL-HTTP2.md) with prior knowledge (h2c),
 * uncompressed length-prefixed messages. fetch does not expose HTTP trailers, so a call counts as
 * answered only when the status says 200, no grpc-status other than 0 came in the headers (where
 * servers put it for errors without a message: "trailers-only"), and the body is exactly one
 * complete message; anything else is a failure, which the agent treats as "runtime not asked".
 */
import { readBounded } from "../util/bytes.ts";
import { createDirectHttpClient, UNIX_SOCKET_ORIGIN } from "../util/direct_http.ts";

/** The gRPC status codes (grpc/grpc, doc/statuscodes.md). */
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;

const STATUS_NAMES = new Map<number, string>(
  Object.entries(GrpcStatus).map(([name, code]) => [code, name]),
);

export function grpcStatusName(code: number): string {
  return STATUS_NAMES.get(code) ?? String(code);
}

export type GrpcOutcome =
  | { ok: true; message: Uint8Array }
  | { ok: false; code: number; details: string };

/** The largest answer accepted, as the kubelet's CRI client allows (16 MiB). */
export const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

const PREFIX_BYTES = 5;

export class GrpcUnaryClient {
  readonly #http: Deno.HttpClient;

  /** `socketPath` is the runtime's unix socket; connections are made on first use. The proxy
   *  variables never apply (lib/util/direct_http.ts). */
  constructor(socketPath: string) {
    this.#http = createDirectHttpClient({
      proxy: { transport: "unix", path: socketPath },
      http1: false,
      http2: true,
    });
  }

  /** One call; never throws. `path` is `/package.Service/Method`. */
  async call(path: string, request: Uint8Array, timeoutMs: number): Promise<GrpcOutcome> {
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      // The socket connects; the origin only has to stay clear of NO_PROXY (lib/util/direct_http.ts).
      const response = await fetch(`${UNIX_SOCKET_ORIGIN}${path}`, {
        method: "POST",
        client: this.#http,
        signal,
        headers: {
          "content-type": "application/grpc+proto",
          te: "trailers",
          "grpc-timeout": `${Math.max(1, Math.ceil(timeoutMs))}m`,
        },
        body: frame(request),
      });
      return await readAnswer(response);
    } catch (error) {
      if (signal.aborted) {
        return { ok: false, code: GrpcStatus.DEADLINE_EXCEEDED, details: "deadline exceeded" };
      }
      return { ok: false, code: GrpcStatus.UNAVAILABLE, details: errorText(error) };
    }
  }

  /** Drops the connection; later calls fail as unavailable. */
  close(): void {
    this.#http.close();
  }
}

/** gRPC's length prefix (a compression flag, a 4-byte big-endian length), then the message. */
export function frame(message: Uint8Array, compressed = false): Uint8Array<ArrayBuffer> {
  const framed = new Uint8Array(PREFIX_BYTES + message.length);
  framed[0] = compressed ? 1 : 0;
  new DataView(framed.buffer).setUint32(1, message.length);
  framed.set(message, PREFIX_BYTES);
  return framed;
}

async function readAnswer(response: Response): Promise<GrpcOutcome> {
  if (response.status !== 200) {
    await response.body?.cancel();
    return { ok: false, code: statusFromHttp(response.status), details: `HTTP ${response.status}` };
  }
  const grpcStatus = response.headers.get("grpc-status");
  if (grpcStatus !== null && grpcStatus !== "0") {
    await response.body?.cancel();
    return {
      ok: false,
      code: /^\d+$/.test(grpcStatus) ? Number(grpcStatus) : GrpcStatus.UNKNOWN,
      details: decodeMessage(response.headers.get("grpc-message")),
    };
  }
  if (!response.headers.get("content-type")?.startsWith("application/grpc")) {
    await response.body?.cancel();
    return {
      ok: false,
      code: GrpcStatus.UNKNOWN,
      details: `not a gRPC answer (content-type ${response.headers.get("content-type")})`,
    };
  }
  const body = response.body
    ? await readBounded(response.body, PREFIX_BYTES + MAX_MESSAGE_BYTES)
    : new Uint8Array();
  if (body === undefined) {
    return {
      ok: false,
      code: GrpcStatus.RESOURCE_EXHAUSTED,
      details: `answer larger than ${MAX_MESSAGE_BYTES} bytes`,
    };
  }
  return unframe(body);
}

/** Exactly one uncompressed message, or why not. */
export function unframe(body: Uint8Array): GrpcOutcome {
  const internal = (details: string): GrpcOutcome => ({
    ok: false,
    code: GrpcStatus.INTERNAL,
    details,
  });
  if (body.length === 0) {
    // The status, which would say why, is in the trailers fetch does not show.
    return internal("the call ended without a message");
  }
  if (body.length < PREFIX_BYTES) return internal("truncated message prefix");
  if (body[0] !== 0) return internal("compressed answer, which was not asked for");
  const length = new DataView(body.buffer, body.byteOffset).getUint32(1);
  if (body.length !== PREFIX_BYTES + length) {
    return internal(
      `answer of ${body.length - PREFIX_BYTES} bytes where the prefix says ${length}`,
    );
  }
  return { ok: true, message: body.subarray(PREFIX_BYTES) };
}

/** The HTTP-to-gRPC status mapping of grpc/grpc doc/http-grpc-status-mapping.md. */
function statusFromHttp(status: number): number {
  switch (status) {
    case 400:
      return GrpcStatus.INTERNAL;
    case 401:
      return GrpcStatus.UNAUTHENTICATED;
    case 403:
      return GrpcStatus.PERMISSION_DENIED;
    case 404:
      return GrpcStatus.UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
      return GrpcStatus.UNAVAILABLE;
    default:
      return GrpcStatus.UNKNOWN;
  }
}

/** grpc-message is percent-encoded UTF-8; a malformed one is shown as sent. */
function decodeMessage(message: string | null): string {
  if (message === null) return "";
  try {
    return decodeURIComponent(message);
  } catch {
    return message;
  }
}

/**
 * fetch says "fetch failed" and puts hyper's account in the cause: "error sending request for
 * url (...): client error (Connect): No such file or directory (os error 2)". The part after the
 * last "): " is what went wrong; the endpoint is named by the caller.
 */
function errorText(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const account = error.cause instanceof Error ? error.cause.message : error.message;
  const cut = account.lastIndexOf("): ");
  return cut === -1 ? account : account.slice(cut + 3);
}
