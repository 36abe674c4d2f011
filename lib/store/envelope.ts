/**
 * The record envelope every store file is wrapped in (docs/stores.md, "Envelope"):
 *
 *     {"version": "v1", "kind": "status", "sha256": "<hex>", "data": {...}}
 *
 * `sha256` is the digest of the UTF-8 bytes of `JSON.stringify(data)`, the compact form, so the
 * file itself may be indented for people to read. Decoding checks, in this order: JSON, the
 * envelope's shape, its version, its kind, the checksum, and last the payload's schema; the
 * first failure is a RecordError naming the file and the problem.
 */
import { createHash } from "node:crypto";
import * as v from "valibot";
import { formatSchemaError } from "../core/schema_error.ts";
import { check, record, type Schema, strictObject } from "../core/schema.ts";

export const ENVELOPE_VERSION = "v1";

export type RecordKind = "status" | "sandbox-checkpoint";

export type RecordProblem =
  | "unreadable"
  | "not-a-file"
  | "bad-name"
  | "bad-json"
  | "bad-envelope"
  | "unknown-version"
  | "wrong-kind"
  | "checksum"
  | "invalid-field"
  | "misplaced";

/** A record file that cannot be served: which file, what kind of problem, and a one-line why. */
export class RecordError extends Error {
  override name = "RecordError";
  constructor(readonly file: string, readonly code: RecordProblem, readonly problem: string) {
    super(`${file}: ${problem}`);
  }
}

function digest(data: unknown): string {
  return createHash("sha256").update(JSON.stringify(data)).digest("hex");
}

/** The file text of one record: indented, with a trailing newline. */
export function encodeRecord(kind: RecordKind, data: unknown): string {
  const envelope = { version: ENVELOPE_VERSION, kind, sha256: digest(data), data };
  return JSON.stringify(envelope, null, 2) + "\n";
}

const EnvelopeSchema = strictObject({
  version: v.string(),
  kind: v.string(),
  sha256: v.pipe(v.string(), v.regex(/^[0-9a-f]{64}$/, "not 64 lowercase hex digits")),
  data: record(v.unknown()),
});

function parseJson(file: string, bytes: Uint8Array): unknown {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new RecordError(file, "bad-json", "not UTF-8 text");
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new RecordError(file, "bad-json", `not JSON: ${(e as Error).message}`);
  }
}

/** Verifies one record file's bytes and returns its payload, or throws a RecordError. */
export function decodeRecord<T>(
  file: string,
  bytes: Uint8Array,
  kind: RecordKind,
  schema: Schema<T>,
): T {
  const json = parseJson(file, bytes);
  // The version is looked at first: a newer agent's record may have any other shape.
  const version = (json as { version?: unknown } | null)?.version;
  if (typeof json === "object" && json !== null && typeof version === "string") {
    if (version !== ENVELOPE_VERSION) {
      throw new RecordError(
        file,
        "unknown-version",
        `unknown record version ${JSON.stringify(version)} (this agent reads ${ENVELOPE_VERSION})`,
      );
    }
  }
  const envelope = check(EnvelopeSchema, json);
  if (!envelope.success) {
    throw new RecordError(
      file,
      "bad-envelope",
      `not a record envelope: ${formatSchemaError(EnvelopeSchema, envelope.issues)}`,
    );
  }
  if (envelope.output.kind !== kind) {
    throw new RecordError(
      file,
      "wrong-kind",
      `a ${JSON.stringify(envelope.output.kind)} record where ${JSON.stringify(kind)} belongs`,
    );
  }
  if (digest(envelope.output.data) !== envelope.output.sha256) {
    throw new RecordError(file, "checksum", "checksum mismatch: the payload was altered or torn");
  }
  const payload = check(schema, envelope.output.data);
  if (!payload.success) {
    throw new RecordError(
      file,
      "invalid-field",
      `invalid payload: ${formatSchemaError(schema, payload.issues)}`,
    );
  }
  return payload.output;
}
