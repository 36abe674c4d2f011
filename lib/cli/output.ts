/** `--output text|json`, which every command that prints a result takes. */
import type { Flags } from "./flags.ts";
import { UsageError } from "./errors.ts";

export type OutputFormat = "text" | "json";

const DEFAULT_OUTPUT: OutputFormat = "text";

export const OUTPUT_FLAG = {
  output: { arg: "text|json", help: "text for people, json for programs", default: DEFAULT_OUTPUT },
} satisfies Flags;

/** The format an `--output` value asks for; absent, the default. */
export function outputFormat(value: unknown): OutputFormat {
  if (value === undefined) return DEFAULT_OUTPUT;
  if (value === "text" || value === "json") return value;
  throw new UsageError(`--output: must be text or json, not ${JSON.stringify(value)}`);
}
