/**
 * A configuration that cannot be used. The message is one line naming the setting as the operator
 * wrote it (`--poll-interval`, `config.yaml: pollInterval`, `NODE_NAME`); the command line maps it
 * to the exit status for bad input.
 */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}
