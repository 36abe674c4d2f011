/**
 * Errors that end a command with a one-line message, and the one place that says which exit
 * status each kind of error gives.
 */
import { ConfigError } from "../config/errors.ts";

export const EXIT_OK = 0;
/** The pass was degraded, a write failed, or a check found problems. */
export const EXIT_FAILURE = 1;
/** Bad input: command line, configuration, snapshot. */
export const EXIT_USAGE = 2;
/** `doctor` found an error: the same status as a bad configuration, which it also is. */
export const EXIT_ERRORS = 2;
/** Another instance holds the lock. */
export const EXIT_LOCKED = 3;
/** A demo a signal ended: 128 + the signal's number, as a shell reports it. */
export const SIGNAL_EXIT: Partial<Record<Deno.Signal, number>> = { SIGINT: 130, SIGTERM: 143 };

export class CommandError extends Error {
  constructor(message: string, readonly exitCode: number) {
    super(message);
    this.name = "CommandError";
  }
}

/** A command's input that cannot be used: flags that do not go together, a bad snapshot. */
export class UsageError extends CommandError {
  constructor(message: string) {
    super(message, EXIT_USAGE);
    this.name = "UsageError";
  }
}

/** The exit status an error ends the command with; undefined for a bug, which is thrown on. */
export function exitCodeOf(error: unknown): number | undefined {
  if (error instanceof ConfigError) return EXIT_USAGE;
  if (error instanceof CommandError) return error.exitCode;
  return undefined;
}
