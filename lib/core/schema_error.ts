/**
 * One-line messages for schema failures at the program's boundaries: the first problem found,
 * prefixed with the path of the field, e.g. `localRunning[0].metadata.name: missing (string)`.
 * A message a schema gives itself is kept; every other one is written here, in the words the
 * agent's messages have always used (`expected string, received number`).
 */
import * as v from "valibot";

type Issue = v.BaseIssue<unknown>;
type SchemaIssues = [Issue, ...Issue[]];

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const key of path) {
    if (typeof key === "number") out += `[${key}]`;
    else if (typeof key === "string" && IDENTIFIER.test(key)) out += out ? `.${key}` : key;
    else out += `[${JSON.stringify(String(key))}]`;
  }
  return out;
}

/** What a value is, as the messages name it. */
function typeName(input: unknown): string {
  if (input === null) return "null";
  if (Array.isArray(input)) return "array";
  if (typeof input === "number" && !Number.isFinite(input)) {
    return Number.isNaN(input) ? "NaN" : "Infinity";
  }
  return typeof input;
}

/** The kinds of value a schema type expects, where its name is not the kind. */
const EXPECTED: Record<string, string> = {
  loose_object: "object",
  strict_object: "object",
};

/** A value of the wrong kind; `missing (kind)` when there is none. */
export function expectedMessage(expected: string, input: unknown): string {
  return input === undefined
    ? `missing (${expected})`
    : `expected ${expected}, received ${typeName(input)}`;
}

function isKeyIssue(issue: Issue): boolean {
  return issue.kind === "schema" && issue.path?.at(-1)?.origin === "key";
}

/** The message of an issue whose schema or check gave none. */
function defaultMessage(issue: Issue): string {
  const { input, requirement } = issue;
  if (isKeyIssue(issue)) return input === undefined ? "missing" : "unknown field";
  switch (issue.type) {
    case "literal":
      return `expected ${issue.expected}`;
    case "picklist":
      return `Invalid option: expected one of ${
        issue.expected?.replace(/^\(|\)$/g, "")
          .replaceAll(" | ", "|")
      }`;
    case "min_length":
      return typeof input === "string"
        ? `Too small: expected string to have >=${requirement} characters`
        : `Too small: expected array to have >=${requirement} items`;
    case "min_value":
      return `Too small: expected number to be >=${requirement}`;
    case "max_value":
      return `Too big: expected number to be <=${requirement}`;
    case "safe_integer":
      return "expected int, received number";
    case "finite":
      return `expected number, received ${input}`;
    case "union":
    case "check":
    case "raw_check":
    case "custom":
    case "regex":
      return "Invalid input";
  }
  return expectedMessage(EXPECTED[issue.type] ?? issue.type, input);
}

/** The configuration every check runs with (see check in schema.ts). */
export const SCHEMA_CONFIG: v.Config<Issue> = { message: defaultMessage };

interface SchemaParts {
  wrapped?: unknown;
  pipe?: readonly { kind: string }[];
  entries?: Record<string, unknown>;
  item?: unknown;
  value?: unknown;
}

/** The schema a wrapper (optional, nullable) or a pipe checks with, if any. */
function inner(schema: SchemaParts): SchemaParts | undefined {
  if (schema.wrapped) return schema.wrapped as SchemaParts;
  return schema.pipe?.findLast((item) => item.kind === "schema") as SchemaParts | undefined;
}

/** The schema of the field at `path`. */
function schemaAt(root: unknown, path: readonly v.IssuePathItem[]): unknown {
  let schema = root as SchemaParts | undefined;
  for (const item of path) {
    for (let next = schema && inner(schema); next; next = inner(next)) schema = next;
    if (item.type === "array") schema = schema?.item as SchemaParts;
    else if (schema?.entries) schema = schema.entries[item.key as string] as SchemaParts;
    else schema = schema?.value as SchemaParts; // a record's
  }
  return schema;
}

/**
 * The first problem of a failed check: the path of the field and what is wrong with it. A field
 * that is absent is reported as its schema would report nothing (`missing (string)`).
 */
export function schemaProblem(
  schema: unknown,
  issues: SchemaIssues,
): { path: PropertyKey[]; message: string } {
  const issue = issues[0];
  const path = (issue.path ?? []).map((item) => item.key as PropertyKey);
  let message = issue.message;
  if (isKeyIssue(issue) && issue.input === undefined) {
    const field = schemaAt(schema, issue.path!);
    if (field) {
      const none = v.safeParse(field as v.GenericSchema, undefined, SCHEMA_CONFIG);
      if (!none.success) message = none.issues[0].message;
    }
  }
  return { path, message };
}

/** Whether a problem's message says the field is absent. */
export function isMissing(message: string): boolean {
  return message === "missing" || message.startsWith("missing (");
}

export function formatSchemaError(schema: unknown, issues: SchemaIssues): string {
  const { path, message } = schemaProblem(schema, issues);
  return `${formatPath(path) || "document"}: ${message}`;
}
