/**
 * ckpt-agent: keeps a node's control plane recoverable when the whole control plane is gone.
 * This file only dispatches, by the command table (lib/cli/commands.ts); each command lives in
 * lib/commands/, the help in lib/cli/help.ts.
 */
import {
  type CommandName,
  DEFAULT_COMMAND,
  isCommandName,
  shorthandOf,
} from "./lib/cli/commands.ts";
import { EXIT_USAGE, exitCodeOf } from "./lib/cli/errors.ts";

type Command = (args: string[]) => Promise<number>;

/**
 * Each command's module is loaded only when it runs: the daemon then never loads the demo's
 * simulated cluster, the certificate generator or the verifier, which made up about a fifth of
 * its JavaScript heap (docs/benchmarks.md, "Node pass"), and `version` and `help` load neither
 * the admin server nor the agent. `deno compile` embeds modules imported this way like static
 * ones.
 */
const LOADERS: Record<CommandName, () => Promise<Command>> = {
  run: async () => (await import("./lib/commands/run.ts")).runCommand,
  status: async () => (await import("./lib/commands/status.ts")).statusCommand,
  pin: async () => (await import("./lib/commands/verbs.ts")).verbCommand("pin"),
  unpin: async () => (await import("./lib/commands/verbs.ts")).verbCommand("unpin"),
  rollback: async () => (await import("./lib/commands/verbs.ts")).verbCommand("rollback"),
  purge: async () => (await import("./lib/commands/verbs.ts")).verbCommand("purge"),
  snapshot: async () => (await import("./lib/commands/snapshot.ts")).snapshotCommand,
  plan: async () => (await import("./lib/commands/plan.ts")).planCommand,
  config: async () => (await import("./lib/commands/config.ts")).configCommand,
  verify: async () => (await import("./lib/commands/verify.ts")).verifyCommand,
  doctor: async () => (await import("./lib/commands/doctor.ts")).doctorCommand,
  demo: async () => (await import("./lib/commands/demo.ts")).demoCommand,
  version: async () => (await import("./lib/commands/version.ts")).versionCommand,
  help: async () => (await import("./lib/cli/help.ts")).helpCommand,
};

function isHelpFlag(arg: string): boolean {
  return shorthandOf(arg)?.command === "help";
}

async function run(name: CommandName, args: string[]): Promise<number> {
  const command = await LOADERS[name]();
  try {
    return await command(args);
  } catch (e) {
    const code = exitCodeOf(e);
    if (code === undefined) throw e;
    console.error(`ckpt-agent ${name}: ${(e as Error).message}`);
    return code;
  }
}

export async function main(args: string[]): Promise<number> {
  const shorthand = args.length === 0 ? undefined : shorthandOf(args[0]);
  if (shorthand?.command === "help") return await run("help", []);
  // `ckpt-agent --version …` is `ckpt-agent version …`; without a command, or with flags first
  // (`ckpt-agent --once`), it is the default command.
  const [name, ...rest] = shorthand
    ? [shorthand.command, ...args.slice(1)]
    : args.length === 0 || args[0].startsWith("-")
    ? [DEFAULT_COMMAND, ...args]
    : args;
  if (!isCommandName(name)) {
    const { overview } = await import("./lib/cli/help.ts");
    console.error(`ckpt-agent: unknown command ${JSON.stringify(name)}\n${overview()}`);
    return EXIT_USAGE;
  }
  // Before anything else: the help of a command whose configuration is broken still prints.
  if (rest.some(isHelpFlag)) return await run("help", [name]);
  return await run(name, rest);
}

/**
 * A kubeconfig without a CA means the system's roots, as for kubectl; Deno's default is its own
 * copy of Mozilla's. Deno builds its root store when the first TLS connection needs it, so this
 * comes in time; an operator's own DENO_TLS_CA_STORE is kept (docs/building.md, "The system's
 * roots").
 */
function trustSystemRoots() {
  if (Deno.env.get("DENO_TLS_CA_STORE") === undefined) Deno.env.set("DENO_TLS_CA_STORE", "system");
}

if (import.meta.main) {
  trustSystemRoots();
  Deno.exit(await main(Deno.args));
}
