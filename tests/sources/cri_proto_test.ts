/**
 * The CRI message codec (lib/sources/cri_proto.ts) on bytes written by hand from the protocol
 * buffers encoding rules, so that it is checked against the wire format, not against itself.
 */
import { deepStrictEqual as assertEquals, throws } from "node:assert/strict";
import { criServices } from "../../lib/sources/cri_proto.ts";

const v1 = criServices().v1;
const bytes = (...b: number[]) => new Uint8Array(b);
const text = (s: string) => [...new TextEncoder().encode(s)];
/** A length-delimited field: tag, length, bytes. */
const chunk = (no: number, content: number[]) => [(no << 3) | 2, content.length, ...content];

Deno.test("a message without fields decodes to every field's default; message fields are null", () => {
  assertEquals(v1.PodSandboxStatus.decodeResponse(bytes()), { status: null, info: {} });
  assertEquals(v1.ListContainers.decodeResponse(bytes(...chunk(1, []))), {
    containers: [{
      id: "",
      pod_sandbox_id: "",
      metadata: null,
      state: "CONTAINER_CREATED",
      created_at: "0",
      labels: {},
      annotations: {},
    }],
  });
});

Deno.test("strings, maps, enums, int64 and nested messages decode from their wire form", () => {
  const container = [
    ...chunk(1, text("c1")),
    ...chunk(3, [...chunk(1, text("app")), 0x10, 0x03]), // metadata: name, attempt 3
    0x30,
    0x02, // state 6: CONTAINER_EXITED
    0x38,
    0x80,
    0x80,
    0x80,
    0x80,
    0x80,
    0x80,
    0x80,
    0x80,
    0x80,
    0x01, // created_at: -2^63
    ...chunk(8, [...chunk(1, text("k")), ...chunk(2, text("välue"))]),
    ...chunk(8, [...chunk(1, text("empty"))]),
  ];
  assertEquals(v1.ListContainers.decodeResponse(bytes(...chunk(1, container))), {
    containers: [{
      id: "c1",
      pod_sandbox_id: "",
      metadata: { name: "app", attempt: 3 },
      state: "CONTAINER_EXITED",
      created_at: "-9223372036854775808",
      labels: { k: "välue", empty: "" },
      annotations: {},
    }],
  });
});

Deno.test("unknown fields of every wire type are skipped; an unknown enum value stays a number", () => {
  const answer = bytes(
    ...chunk(1, text("0.1.0")),
    0x2d,
    1,
    2,
    3,
    4, // field 5, fixed32
    0x31,
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8, // field 6, fixed64
    0x38,
    0x96,
    0x01, // field 7, varint
    ...chunk(9, text("images and more")),
    ...chunk(4, text("v1")),
  );
  assertEquals(v1.Version.decodeResponse(answer), {
    version: "0.1.0",
    runtime_name: "",
    runtime_version: "",
    runtime_api_version: "v1",
  });
  const sandbox = [0x18, 0x07]; // state 7
  assertEquals(
    (v1.ListPodSandbox.decodeResponse(bytes(...chunk(1, sandbox))) as {
      items: { state: unknown }[];
    }).items[0].state,
    7,
  );
});

Deno.test("a message cut short does not decode", () => {
  throws(() => v1.Version.decodeResponse(bytes(0x0a, 0x05, 0x61)), /cut short/);
  throws(() => v1.ListPodSandbox.decodeResponse(bytes(0x20, 0x80)), /cut short/);
});

Deno.test("requests encode as the wire format says, and what is encoded decodes back", () => {
  const request = { filter: { state: { state: "SANDBOX_NOTREADY" }, label_selector: { a: "b" } } };
  const encoded = v1.ListPodSandbox.encodeRequest(request);
  assertEquals(
    [...encoded],
    chunk(1, [
      ...chunk(2, [0x08, 0x01]),
      ...chunk(3, [...chunk(1, text("a")), ...chunk(2, text("b"))]),
    ]),
  );
  assertEquals(v1.ListPodSandbox.decodeRequest(encoded), {
    filter: { id: "", state: { state: "SANDBOX_NOTREADY" }, label_selector: { a: "b" } },
  });
  const status = v1.PodSandboxStatus.encodeRequest({ pod_sandbox_id: "s", verbose: true });
  assertEquals([...status], [...chunk(1, text("s")), 0x10, 0x01]);
  throws(
    () => v1.ListContainers.encodeRequest({ filter: { state: { state: "RUNNING" } } }),
    /state/,
  );
  const big = {
    containers: [{ created_at: "9223372036854775807", metadata: { attempt: 4294967295 } }],
  };
  const decoded = v1.ListContainers.decodeResponse(v1.ListContainers.encodeResponse(big)) as {
    containers: { created_at: string; metadata: { attempt: number } }[];
  };
  assertEquals(decoded.containers[0].created_at, "9223372036854775807");
  assertEquals(decoded.containers[0].metadata.attempt, 4294967295);
});
