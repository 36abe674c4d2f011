/**
 * One-line messages for schema failures at the program's boundaries: the first problem found,
 * prefixed with the path of the field, e.g. `localRunning[0].metadata.name: missing (string)`.
 */
import type { z } from "zod";

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

export function formatSchemaError(error: z.ZodError): string {
  const issue = error.issues[0];
  let path: PropertyKey[] = [...issue.path];
  let message = issue.message.replace(/^Invalid input: /, "");
  if (issue.code === "unrecognized_keys") {
    path = [...path, issue.keys[0]];
    message = "unknown field";
  } else if (issue.code === "invalid_type" && message.endsWith("received undefined")) {
    message = `missing (${issue.expected})`;
  }
  return `${formatPath(path) || "document"}: ${message}`;
}
