/** Command-line parsing on node:util's parseArgs, with errors turned into UsageError. */
import { parseArgs, type ParseArgsConfig } from "node:util";
import { UsageError } from "./errors.ts";

export type Options = NonNullable<ParseArgsConfig["options"]>;

export function parseFlags<O extends Options>(args: string[], options: O) {
  try {
    return parseArgs({ args, options, strict: true, allowPositionals: false });
  } catch (e) {
    // parseArgs phrases its errors as sentences that already name the flag, some over several
    // lines; errors are one line.
    throw new UsageError((e as Error).message.split("\n").join(" "));
  }
}
