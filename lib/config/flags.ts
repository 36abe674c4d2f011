/**
 * The command line, parsed strictly (node:util's parseArgs): every flag known, no positional
 * argument unless the command takes one (the verbs' checkpoint id). A bad flag is a ConfigError for every command, since a command's flags are the
 * configuration of that one run.
 */
import { parseArgs, type ParseArgsConfig } from "node:util";
import { ConfigError } from "./errors.ts";

export type FlagOptions = NonNullable<ParseArgsConfig["options"]>;

export function parseFlags<O extends FlagOptions>(
  args: string[],
  options: O,
  allowPositionals = false,
) {
  try {
    return parseArgs({ args, options, strict: true, allowPositionals });
  } catch (e) {
    // parseArgs phrases its errors as sentences that already name the flag, some over several
    // lines; errors are one line.
    throw new ConfigError((e as Error).message.split("\n").join(" "));
  }
}
