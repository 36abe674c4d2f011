/**
 * ckpt-agent: keeps a node's control plane recoverable when the whole control plane is gone.
 * This file only dispatches; each command lives in lib/commands/.
 */
import { exitCodeOf } from "./lib/cli/errors.ts";

const USAGE = `usage: ckpt-agent [command] [flags]

commands:
  run [flags]              the daemon: a pass every poll interval (the default command)
  --once [--dry-run] [--output text|json]
                           one pass, for runbooks (exit 0 complete, 1 degraded, 2 config, 3 locked)
  status [--output text|json]
                           the checkpoints and their states, from the running agent (its admin
                           endpoint) or else from the state directory
  snapshot [flags]         print the live observations as a plan snapshot
  plan --snapshot FILE|-   print the plan of one pass over a recorded snapshot
  config [--config FILE]   check the configuration and print the effective one as YAML
  verify [flags] [--json]  check stored records, checkpoint manifests and stored files;
                           exit 1 if anything is unsound
  demo [--output text|json] [--pause]
                           the agent through an outage on a simulated node (about a second)
  version [--output text|json]   the version, the git commit it was built from, the Deno version`;

type Command = (args: string[]) => Promise<number>;

/**
 * Each command's module is loaded only when it runs: the daemon then never loads the demo's
 * simulated cluster, the certificate generator or the verifier, which made up about a fifth of
 * its JavaScript heap (docs/benchmarks.md, "Node pass"). `deno compile` embeds modules imported
 * this way like static ones.
 */
const COMMANDS: Record<string, () => Promise<Command>> = {
  run: async () => (await import("./lib/commands/run.ts")).runCommand,
  status: async () => (await import("./lib/commands/status.ts")).statusCommand,
  snapshot: async () => (await import("./lib/commands/snapshot.ts")).snapshotCommand,
  plan: async () => (await import("./lib/commands/plan.ts")).planCommand,
  config: async () => (await import("./lib/commands/config.ts")).configCommand,
  verify: async () => (await import("./lib/commands/verify.ts")).verifyCommand,
  demo: async () => (await import("./lib/commands/demo.ts")).demoCommand,
  version: async () => (await import("./lib/commands/version.ts")).versionCommand,
};

function isHelp(arg: string): boolean {
  return arg === "help" || arg === "--help" || arg === "-h";
}

export async function main(args: string[]): Promise<number> {
  // Without a command, or with flags first (`ckpt-agent --once`), it is the daemon's command.
  const [name, ...rest] = args.length === 0 || args[0].startsWith("-") && !isHelp(args[0])
    ? ["run", ...args]
    : args;
  if (isHelp(name)) {
    console.log(USAGE);
    return 0;
  }
  if (!Object.hasOwn(COMMANDS, name)) {
    console.error(`ckpt-agent: unknown command ${JSON.stringify(name)}\n${USAGE}`);
    return 2;
  }
  const command = await COMMANDS[name]();
  try {
    return await command(rest);
  } catch (e) {
    const code = exitCodeOf(e);
    if (code === undefined) throw e;
    console.error(`ckpt-agent ${name}: ${(e as Error).message}`);
    return code;
  }
}

if (import.meta.main) Deno.exit(await main(Deno.args));
