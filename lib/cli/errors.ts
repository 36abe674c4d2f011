/** Errors that end a command with a specific exit code and a one-line message. */

export const EXIT_OK = 0;
/** The pass was degraded, a write failed, or a check found problems. */
export const EXIT_FAILURE = 1;
/** Bad input: command line, configuration, snapshot. */
export const EXIT_USAGE = 2;
/** Another instance holds the lock. */
export const EXIT_LOCKED = 3;

export class CommandError extends Error {
  constructor(message: string, readonly exitCode: number) {
    super(message);
    this.name = "CommandError";
  }
}

export class UsageError extends CommandError {
  constructor(message: string) {
    super(message, EXIT_USAGE);
    this.name = "UsageError";
  }
}
