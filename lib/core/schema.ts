/**
 * The schema library's building blocks as the agent uses them, and the one way to check a value
 * (with the messages of schema_error.ts). Objects and records take only plain objects: an array
 * where an object belongs is refused at every boundary, as it always was. Numbers are finite:
 * JSON can spell an infinite one (`1e999`), and no field of ours means that.
 */
import * as v from "valibot";
import { expectedMessage, SCHEMA_CONFIG } from "./schema_error.ts";

/** A schema whose output is T, whatever it is given. */
export type Schema<T> = v.GenericSchema<unknown, T>;

function isPlainObject(input: unknown): input is Record<string, unknown> {
  return typeof input === "object" && input !== null && !Array.isArray(input);
}

function plain(kind: string) {
  return v.custom<Record<string, unknown>>(
    isPlainObject,
    (issue) => expectedMessage(kind, issue.input),
  );
}

const PLAIN_OBJECT = plain("object");
const PLAIN_RECORD = plain("record");

/** Unknown keys are dropped. */
export function object<E extends v.ObjectEntries>(entries: E) {
  return v.pipe(PLAIN_OBJECT, v.object(entries));
}

/** Unknown keys are kept. */
export function looseObject<E extends v.ObjectEntries>(entries: E) {
  return v.pipe(PLAIN_OBJECT, v.looseObject(entries));
}

/** Unknown keys are refused: `name: unknown field`. */
export function strictObject<E extends v.ObjectEntries>(entries: E) {
  return v.pipe(PLAIN_OBJECT, v.strictObject(entries));
}

/** String keys, every value checked by `value`. */
export function record<S extends v.GenericSchema>(value: S) {
  return v.pipe(PLAIN_RECORD, v.record(v.string(), value));
}

export function number() {
  return v.pipe(v.number(), v.finite());
}

/** A safe integer (what JSON and JavaScript agree on). */
export function int() {
  return v.pipe(number(), v.safeInteger());
}

/** Checks `input`; on failure, formatSchemaError(schema, result.issues) says why in one line. */
export function check<S extends v.GenericSchema>(schema: S, input: unknown): v.SafeParseResult<S> {
  return v.safeParse(schema, input, SCHEMA_CONFIG);
}
