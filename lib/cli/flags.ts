/**
 * A command's own flags, described once: the command parses them from here (with the settings'
 * flags when it takes the configuration), and the help prints them.
 */
import type { FlagOptions } from "../config/flags.ts";

export interface Flag {
  /** The flag's argument as the help names it; a flag without one is a switch. */
  arg?: string;
  help: string;
  /** What an absent flag means, as the help says it; the command applies it. */
  default?: string;
}

export type Flags = Record<string, Flag>;

/** parseArgs's options for the flags: a string for each flag with an argument, else a switch. */
export type OptionsOf<F extends Flags> = {
  [K in keyof F]: F[K] extends { arg: string } ? { type: "string" } : { type: "boolean" };
};

export function flagOptions<F extends Flags>(flags: F): OptionsOf<F> & FlagOptions {
  return Object.fromEntries(
    Object.entries(flags).map((
      [name, flag],
    ) => [name, flag.arg === undefined ? { type: "boolean" } : { type: "string" }]),
  ) as OptionsOf<F> & FlagOptions;
}
