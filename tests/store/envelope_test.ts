/** The record envelope: round trip, and a typed error for every way a file can be unsound. */
import { deepStrictEqual as assertEquals, ok as assert, throws } from "node:assert/strict";
import { createHash } from "node:crypto";
import {
  decodeRecord,
  encodeRecord,
  ENVELOPE_VERSION,
  RecordError,
  type RecordProblem,
} from "../../lib/store/envelope.ts";
import { StoredStatusSchema } from "../../lib/store/status_record.ts";
import { statusRecord } from "./records.ts";

const bytes = (text: string) => new TextEncoder().encode(text);

function decodeStatus(text: string | Uint8Array) {
  return decodeRecord(
    "/s/ns_a.json",
    typeof text === "string" ? bytes(text) : text,
    "status",
    StoredStatusSchema,
  );
}

function problemOf(text: string | Uint8Array): { code: RecordProblem; message: string } {
  try {
    decodeStatus(text);
  } catch (e) {
    assert(e instanceof RecordError, String(e));
    assertEquals(e.file, "/s/ns_a.json");
    assert(e.message.startsWith("/s/ns_a.json: "), e.message);
    return { code: e.code, message: e.message };
  }
  throw new Error("decoded");
}

Deno.test("encode: versioned envelope, sha256 of the compact payload, indented for people", () => {
  const record = statusRecord("ns/a");
  const text = encodeRecord("status", record);
  const envelope = JSON.parse(text);
  assertEquals(Object.keys(envelope), ["version", "kind", "sha256", "data"]);
  assertEquals(envelope.version, ENVELOPE_VERSION);
  assertEquals(envelope.kind, "status");
  assertEquals(
    envelope.sha256,
    createHash("sha256").update(JSON.stringify(record)).digest("hex"),
  );
  assert(text.includes('\n  "data": {\n    "id": "ns/a",'), text);
  assert(text.endsWith("}\n"));
  assertEquals(decodeStatus(text), record);
});

Deno.test("decode ignores the file's whitespace: the checksum covers the payload's values", () => {
  const record = statusRecord("ns/a", { message: 'ünïcode \u2028 and "quotes"' });
  const compact = JSON.stringify(JSON.parse(encodeRecord("status", record)));
  assertEquals(decodeStatus(compact), record);
});

Deno.test("every kind of unsound file is a RecordError with its own code", () => {
  const good = encodeRecord("status", statusRecord("ns/a"));
  const edit = (fn: (e: Record<string, unknown>) => void) => {
    const e = JSON.parse(good);
    fn(e);
    return JSON.stringify(e);
  };
  const table: [string | Uint8Array, RecordProblem, RegExp][] = [
    [good.slice(0, good.length / 2), "bad-json", /not JSON/],
    ["", "bad-json", /not JSON/],
    [new Uint8Array([0xc3, 0x28]), "bad-json", /not UTF-8/],
    ["null", "bad-envelope", /not a record envelope/],
    ['"v1"', "bad-envelope", /not a record envelope/],
    [edit((e) => delete e.sha256), "bad-envelope", /sha256: missing/],
    [edit((e) => e.sha256 = "ABC"), "bad-envelope", /sha256: not 64 lowercase hex digits/],
    [edit((e) => e.extra = 1), "bad-envelope", /extra: unknown field/],
    [edit((e) => e.data = [1]), "bad-envelope", /data:/],
    [edit((e) => delete e.version), "bad-envelope", /version: missing/],
    [edit((e) => e.version = 2), "bad-envelope", /version:/],
    [edit((e) => e.version = "v2"), "unknown-version", /unknown record version "v2"/],
    // An unknown version wins over any other shape: a newer agent may have changed it all.
    [JSON.stringify({ version: "v9", whatever: true }), "unknown-version", /"v9"/],
    [edit((e) => e.kind = "sandbox-checkpoint"), "wrong-kind", /"sandbox-checkpoint" record/],
    [
      edit((e) => (e.data as Record<string, unknown>).message = "tampered"),
      "checksum",
      /checksum mismatch/,
    ],
    [
      encodeRecord("status", { ...statusRecord("ns/a"), state: "remove" }),
      "invalid-field",
      /invalid payload: state:/,
    ],
    [
      encodeRecord("status", { ...statusRecord("ns/a"), createdAt: "yesterday" }),
      "invalid-field",
      /createdAt: not an RFC 3339 timestamp: "yesterday"/,
    ],
    [
      encodeRecord("status", { ...statusRecord("ns/a"), reason: 7 }),
      "invalid-field",
      /reason: expected string/,
    ],
    [
      encodeRecord("status", { ...statusRecord("ns/a"), graceEnd: "2026-01-01T00:01:00Z" }),
      "invalid-field",
      /graceEnd: only inactive-grace and active-grace have a deadline/,
    ],
    [
      encodeRecord("status", { ...statusRecord("ns/a"), phase: "created" }),
      "invalid-field",
      /phase: unknown field/,
    ],
  ];
  for (const [text, code, pattern] of table) {
    const problem = problemOf(text);
    assertEquals(problem.code, code, `${problem.message} for ${text}`);
    assert(pattern.test(problem.message), problem.message);
    assert(!problem.message.includes("\n"), "one line");
  }
});

Deno.test("a RecordError is an Error with the file in its message", () => {
  throws(
    () => decodeStatus("{"),
    (e: unknown) => e instanceof Error && /ns_a\.json/.test(String(e)),
  );
});
