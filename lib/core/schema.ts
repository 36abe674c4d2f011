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

/**
 * Keys valibot leaves out of the objects it copies (and of records, unchecked), as if they were
 * dangerous: a label or annotation may well be named so, and a copy of a pod must keep it. Only
 * `__proto__` is left out: assigning it would replace the copy's prototype.
 */
const LEFT_OUT = ["constructor", "prototype"];

function hasLeftOutKey(input: Record<string, unknown>): boolean {
  return LEFT_OUT.some((key) => Object.hasOwn(input, key));
}

/** Unknown keys are kept, in the order they came. */
export function looseObject<E extends v.ObjectEntries>(entries: E) {
  const schema = v.looseObject(entries);
  const run: typeof schema["~run"] = (dataset, config) => {
    const input = dataset.value as Record<string, unknown>;
    const out = schema["~run"](dataset, config);
    if (out.typed && hasLeftOutKey(input)) {
      const copy: Record<string, unknown> = {};
      for (const key in entries) if (Object.hasOwn(out.value, key)) copy[key] = out.value[key];
      for (const key in input) {
        if (Object.hasOwn(input, key) && key !== "__proto__" && !Object.hasOwn(entries, key)) {
          copy[key] = input[key];
        }
      }
      out.value = copy as typeof out.value;
    }
    return out;
  };
  return v.pipe(PLAIN_OBJECT, { ...schema, "~run": run });
}

/** Unknown keys are refused: `name: unknown field`. */
export function strictObject<E extends v.ObjectEntries>(entries: E) {
  return v.pipe(PLAIN_OBJECT, v.strictObject(entries));
}

/** String keys, every value checked by `value` (valibot's record, but for LEFT_OUT keys). */
export function record<S extends v.GenericSchema>(value: S) {
  const schema = v.record(v.string(), value);
  const run: typeof schema["~run"] = (dataset, config) => {
    const input = dataset.value as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    const issues: v.BaseIssue<unknown>[] = [];
    let typed = true;
    for (const key in input) {
      if (!Object.hasOwn(input, key) || key === "__proto__") continue;
      const entry = value["~run"]({ value: input[key] }, config);
      for (const issue of entry.issues ?? []) {
        const item = { type: "object", origin: "value", input, key, value: input[key] } as const;
        issues.push({ ...issue, path: [item, ...issue.path ?? []] });
      }
      if (!entry.typed) typed = false;
      out[key] = entry.value;
      if (entry.issues && config.abortEarly) break;
    }
    const done = { typed, value: out, ...(issues.length > 0 ? { issues } : {}) };
    return done as unknown as ReturnType<typeof schema["~run"]>;
  };
  return v.pipe(PLAIN_RECORD, { ...schema, "~run": run });
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
