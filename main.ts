/**
 * ckpt-agent: keeps a node's control plane recoverable when the whole control plane is gone.
 * This file only dispatches; each command lives in lib/commands/.
 */
import { CommandError } from "./lib/cli/errors.ts";
import { configCommand } from "./lib/commands/config.ts";
import { planCommand } from "./lib/commands/plan.ts";
import { verifyCommand } from "./lib/commands/verify.ts";

const USAGE = `usage: ckpt-agent <command> [flags]

commands:
  plan --snapshot FILE|-   print the plan of one pass over a recorded snapshot
  config [--config FILE]   check the configuration and print the effective one as YAML
  verify [--state-dir DIR] [--json]   check every stored record; exit 1 if any is unsound`;

type Command = (args: string[]) => Promise<number>;

const COMMANDS: Record<string, Command> = {
  plan: planCommand,
  config: configCommand,
  verify: verifyCommand,
};

export async function main(args: string[]): Promise<number> {
  const [name, ...rest] = args;
  if (name === "help" || name === "--help" || name === "-h") {
    console.log(USAGE);
    return 0;
  }
  const command = name === undefined ? undefined : COMMANDS[name];
  if (!command) {
    console.error(`ckpt-agent: unknown command ${JSON.stringify(name ?? "")}\n${USAGE}`);
    return 2;
  }
  try {
    return await command(rest);
  } catch (e) {
    if (e instanceof CommandError) {
      console.error(`ckpt-agent ${name}: ${e.message}`);
      return e.exitCode;
    }
    throw e;
  }
}

if (import.meta.main) Deno.exit(await main(Deno.args));
