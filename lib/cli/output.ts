/**
 * `--output FORMAT` and its alias `--json`, which every command that prints a result takes: the
 * flags and their meaning are defined here once, and each command's entry in the command table
 * (commands.ts) says which formats it prints.
 */
import type { Flags } from "./flags.ts";
import { UsageError } from "./errors.ts";

export type OutputFormat = "text" | "json";

/** A command's formats, its default first. */
export type OutputFormats = readonly [OutputFormat, ...OutputFormat[]];

/** For people by default, for programs on request. */
export const TEXT_OR_JSON = ["text", "json"] as const satisfies OutputFormats;
/** A command whose output is a document for programs (or for another command) and nothing else. */
export const JSON_ONLY = ["json"] as const satisfies OutputFormats;

export function outputFlags(formats: OutputFormats) {
  return {
    output: {
      arg: formats.join("|"),
      help: formats.length === 1 ? "json, the only format" : "text for people, json for programs",
      default: formats[0],
    },
    // Runbooks written for `verify --json`, its first spelling, keep working on every command.
    json: { help: "the same as --output json" },
  } satisfies Flags;
}

/** The format the parsed `--output` and `--json` ask for; neither, the command's default. */
export function outputFormat(
  values: { output?: unknown; json?: unknown },
  formats: OutputFormats,
): OutputFormat {
  const { output, json } = values;
  if (output !== undefined && !formats.includes(output as OutputFormat)) {
    throw new UsageError(
      `--output: must be ${formats.join(" or ")}, not ${JSON.stringify(output)}`,
    );
  }
  if (json === true) {
    if (output !== undefined && output !== "json") {
      throw new UsageError(`--json: the same as --output json, not with --output ${output}`);
    }
    return "json";
  }
  return (output as OutputFormat | undefined) ?? formats[0];
}
