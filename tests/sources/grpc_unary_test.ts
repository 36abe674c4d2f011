/**
 * The unary gRPC transport against raw HTTP/2 servers on real unix sockets: what it sends, how
 * it reads every shape of answer a server can give, and that a GOAWAY never takes it down.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import {
  frame as grpcFrame,
  GrpcStatus,
  GrpcUnaryClient,
  MAX_MESSAGE_BYTES,
} from "../../lib/sources/grpc_unary.ts";
import {
  grpcAnswer,
  startH2cServer,
  type UnaryCall,
  type UnaryHandler,
  untilClosed,
} from "../../lib/sim/h2c_server.ts";
import { assertSurvives } from "../helpers/survival_probe.ts";
import { withTempDir } from "../helpers/temp_dir.ts";

const PATH = "/runtime.v1.RuntimeService/Version";
const REQUEST = new TextEncoder().encode("request bytes");
const ANSWER = new TextEncoder().encode("answer bytes");

/** One call to a server that handles it with `handle`; the server and client are gone after. */
async function callWith(handle: UnaryHandler, timeoutMs = 5_000) {
  return await withTempDir(async (dir) => {
    const server = await startH2cServer(`${dir}/runtime.sock`, handle);
    const client = new GrpcUnaryClient(server.socketPath);
    try {
      return await client.call(PATH, REQUEST, timeoutMs);
    } finally {
      client.close();
      await server.close();
    }
  });
}

function respond(headers: Record<string, string>, body?: Uint8Array<ArrayBuffer>): UnaryHandler {
  return () => new Response(body, { headers: { "content-type": "application/grpc", ...headers } });
}

Deno.test("a call sends one framed message with gRPC's headers, and returns the answer's message", async () => {
  let seen: Pick<UnaryCall, "path" | "body"> & { headers: Record<string, string> } | undefined;
  const outcome = await callWith((call) => {
    // The request's Headers are gone once it is answered.
    seen = { path: call.path, body: call.body, headers: Object.fromEntries(call.headers) };
    return grpcAnswer(ANSWER);
  }, 2_500);
  assertEquals(outcome, { ok: true, message: ANSWER });
  assertEquals(seen!.body, grpcFrame(REQUEST));
  assertEquals(seen!.path, PATH);
  assertEquals(seen!.headers["content-type"], "application/grpc+proto");
  assertEquals(seen!.headers["te"], "trailers");
  assertEquals(seen!.headers["grpc-timeout"], "2500m");
});

Deno.test("an error status in the headers (trailers-only) is returned with its decoded message", async () => {
  const outcome = await callWith(respond({
    "grpc-status": "12",
    "grpc-message": "unknown method Version for service runtime.v1.RuntimeService %E2%9C%93",
  }));
  assertEquals(outcome, {
    ok: false,
    code: GrpcStatus.UNIMPLEMENTED,
    details: "unknown method Version for service runtime.v1.RuntimeService ✓",
  });
});

Deno.test("HTTP statuses other than 200 map to gRPC codes as gRPC specifies", async () => {
  const cases: [number, number][] = [
    [400, GrpcStatus.INTERNAL],
    [401, GrpcStatus.UNAUTHENTICATED],
    [403, GrpcStatus.PERMISSION_DENIED],
    [404, GrpcStatus.UNIMPLEMENTED],
    [503, GrpcStatus.UNAVAILABLE],
    [500, GrpcStatus.UNKNOWN],
  ];
  for (const [status, code] of cases) {
    const outcome = await callWith(() => new Response("not grpc", { status }));
    assertEquals(outcome, { ok: false, code, details: `HTTP ${status}` }, `HTTP ${status}`);
  }
});

Deno.test("answers that are not exactly one uncompressed message are failures, never values", async () => {
  const message = grpcFrame(ANSWER);
  const cases: [string, UnaryHandler, number, string][] = [
    [
      // A server that fails after its headers puts the status in trailers, which fetch hides.
      "no message",
      respond({}),
      GrpcStatus.INTERNAL,
      "the call ended without a message",
    ],
    [
      "a compressed message",
      respond({}, grpcFrame(ANSWER, true)),
      GrpcStatus.INTERNAL,
      "compressed answer, which was not asked for",
    ],
    [
      "a truncated message",
      respond({}, message.subarray(0, message.length - 1)),
      GrpcStatus.INTERNAL,
      `answer of ${ANSWER.length - 1} bytes where the prefix says ${ANSWER.length}`,
    ],
    [
      "two messages",
      respond({}, new Uint8Array([...message, ...message])),
      GrpcStatus.INTERNAL,
      `answer of ${2 * message.length - 5} bytes where the prefix says ${ANSWER.length}`,
    ],
    [
      "a prefix cut short",
      respond({}, new Uint8Array([0, 0, 0])),
      GrpcStatus.INTERNAL,
      "truncated message prefix",
    ],
    [
      "not a gRPC content type",
      respond({ "content-type": "text/plain" }, message),
      GrpcStatus.UNKNOWN,
      "not a gRPC answer (content-type text/plain)",
    ],
  ];
  for (const [name, handle, code, details] of cases) {
    assertEquals(await callWith(handle), { ok: false, code, details }, name);
  }
});

Deno.test("an answer over 16 MiB is refused without being read to the end", async () => {
  const outcome = await callWith(respond({}, grpcFrame(new Uint8Array(MAX_MESSAGE_BYTES + 1))));
  assertEquals(outcome, {
    ok: false,
    code: GrpcStatus.RESOURCE_EXHAUSTED,
    details: `answer larger than ${MAX_MESSAGE_BYTES} bytes`,
  });
});

Deno.test("no socket is unavailable; a server that never answers is a deadline exceeded", async () => {
  await withTempDir(async (dir) => {
    const client = new GrpcUnaryClient(`${dir}/absent.sock`);
    try {
      const outcome = await client.call(PATH, REQUEST, 1_000);
      assertEquals(outcome, {
        ok: false,
        code: GrpcStatus.UNAVAILABLE,
        details: "No such file or directory (os error 2)",
      });
    } finally {
      client.close();
    }
  });
  const silent = await callWith(async (call) => {
    await untilClosed(call);
    return new Response(null, { status: 503 });
  }, 150);
  assertEquals(silent, {
    ok: false,
    code: GrpcStatus.DEADLINE_EXCEEDED,
    details: "deadline exceeded",
  });
});

Deno.test("a runtime that keeps restarting, closing connections with a GOAWAY, never takes the process down", async () => {
  // Its own process, so that a crash is this test's failure and not the end of the test run.
  await withTempDir((dir) =>
    assertSurvives(new URL("./goaway_probe.ts", import.meta.url), [dir, "300"], "300")
  );
});
