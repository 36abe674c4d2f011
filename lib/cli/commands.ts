/**
 * Every command: what it is for and its own flags. main.ts dispatches by this table (each
 * command's module is loaded only when it runs), the help prints it, and each command parses its
 * flags from its entry. A command that takes the configuration also takes every setting's flag
 * and --config (lib/config/settings.ts).
 */
import { flagOptions, type Flags } from "./flags.ts";
import {
  JSON_ONLY,
  outputFlags,
  type OutputFormat,
  outputFormat,
  type OutputFormats,
  TEXT_OR_JSON,
} from "./output.ts";

export interface CommandSpec {
  /** What follows the command's name in its usage line. */
  synopsis: string;
  /** One line, for the list of commands. */
  summary: string;
  /** Its own help's paragraph, when the summary does not say enough. */
  about?: string;
  flags: Flags;
  /**
   * The formats it prints its result in, its default first: it takes --output and --json
   * (output.ts). Absent for a command that prints no result.
   */
  output?: OutputFormats;
  /** Takes --config and the settings' flags. */
  config: boolean;
}

/** What every verb's help says about where it runs. */
const VERB_ABOUT = "Through the running agent's admin endpoint (with the token of " +
  "--admin-token-file), or, when no agent runs, on disk under the agent's lock. Exit 0 done " +
  "(or nothing to do), 1 refused or unknown checkpoint, 2 bad input, 3 an agent holds the lock " +
  "but its admin endpoint does not answer.";

export const COMMANDS = {
  run: {
    synopsis: "[flags]",
    summary: "the daemon: a pass every poll interval (the default command); --once: one pass",
    about: "The daemon: a pass every poll interval, and the admin endpoint, until SIGTERM or " +
      "SIGINT. With --once, one pass under the daemon's lock, for runbooks: exit 0 complete, 1 " +
      "degraded (or a write failed, something was not recorded, no lock was taken), 2 bad " +
      "configuration, 3 another agent holds the lock.",
    flags: {
      once: { help: "one pass, then exit" },
      "dry-run": { help: "with --once: observe and print the plan; write nothing, take no lock" },
    },
    output: TEXT_OR_JSON,
    config: true,
  },
  status: {
    synopsis: "[flags]",
    summary: "the checkpoints and their states, from the running agent (its admin endpoint) or " +
      "else from the state directory",
    flags: {},
    output: TEXT_OR_JSON,
    config: true,
  },
  pin: {
    synopsis: "NAMESPACE/NAME [flags]",
    summary: "keep a checkpoint's version in place: no new spec is promoted until unpinned",
    about: "Keep a checkpoint's version in place: no candidate is promoted until `unpin`. " +
      VERB_ABOUT,
    flags: {},
    output: TEXT_OR_JSON,
    config: true,
  },
  unpin: {
    synopsis: "NAMESPACE/NAME [flags]",
    summary: "let a checkpoint's candidates be promoted again",
    about: "Let a checkpoint's candidates be promoted again. " + VERB_ABOUT,
    flags: {},
    output: TEXT_OR_JSON,
    config: true,
  },
  rollback: {
    synopsis: "NAMESPACE/NAME [--to N] [flags]",
    summary: "make an older version the checkpoint (pinned); an active copy is replaced",
    about: "Make an older version the checkpoint, and pin it: by default the version before " +
      "the newest, or version N. An active copy is replaced through the kubelet. " + VERB_ABOUT,
    flags: {
      to: { arg: "N", help: "the version to make the checkpoint (`status` lists them)" },
    },
    output: TEXT_OR_JSON,
    config: true,
  },
  purge: {
    synopsis: "NAMESPACE/NAME [--force] [flags]",
    summary: "remove a checkpoint and all its versions now (refused while active)",
    about: "Remove a checkpoint, all its versions and their files now; refused while it is " +
      "active unless --force, which withdraws the running copy first. A parent still asking " +
      "to be checkpointed gets a new first version on the next pass. " + VERB_ABOUT,
    flags: { force: { help: "also when active: withdraw its copy first" } },
    output: TEXT_OR_JSON,
    config: true,
  },
  snapshot: {
    synopsis: "[flags]",
    summary: "print the live observations as a plan snapshot; writes nothing",
    about: "Print the live observations as a plan snapshot; writes nothing. " +
      "`ckpt-agent snapshot | ckpt-agent plan --snapshot -` gives what `--once --dry-run` gives.",
    flags: {},
    output: JSON_ONLY,
    config: true,
  },
  plan: {
    synopsis: "--snapshot FILE|-",
    summary: "print the plan of one pass over a recorded snapshot",
    about: "Print the plan of one pass over a recorded snapshot, as JSON; exit 2 for a bad one.",
    flags: {
      snapshot: {
        arg: "FILE|-",
        help:
          "the snapshot (as `ckpt-agent snapshot` prints it), or - for standard input; required",
      },
    },
    output: JSON_ONLY,
    config: false,
  },
  config: {
    synopsis: "[flags]",
    summary: "check the configuration and print the effective one as YAML",
    about: "Check the configuration as `run` does, and print the effective one as YAML, itself " +
      "a valid configuration file (as JSON with --output json); exit 2 with one line naming the " +
      "key when a setting is bad, the line `run` would refuse it with.",
    flags: {},
    output: TEXT_OR_JSON,
    config: true,
  },
  verify: {
    synopsis: "[flags]",
    summary: "check stored records, checkpoint manifests and stored files; exit 1 if anything " +
      "is unsound",
    about: "Check every status and sandbox record, checkpoint manifest (content, mode, file " +
      "name) and stored file; read-only. Exit 0 when all is sound, 1 otherwise (one line per " +
      "problem).",
    flags: {},
    output: TEXT_OR_JSON,
    config: true,
  },
  doctor: {
    synopsis: "[flags]",
    summary: "check that this node is set up for the agent to bring its control plane back",
    about: "Check that this node is set up for the agent to bring its control plane back: the " +
      "kubelet's static-pod directory is staticPodDir; every configured directory exists with " +
      "its owner and mode, on a writable mount with room; the systemd unit can write them; each " +
      "source answers with the configured credentials; which parents are not on the host " +
      "network; the certificates; the node's clock. Each finding is ok, a warning or an error, " +
      "and says what to change. Writes nothing. Exit 0 when all is well, 1 on warnings, 2 on " +
      "errors (or a bad configuration).",
    flags: {},
    output: TEXT_OR_JSON,
    config: true,
  },
  demo: {
    synopsis: "[flags]",
    summary:
      "the agent through an outage and a bad rollout on a simulated node (about two seconds)",
    flags: { pause: { help: "wait for Enter after each step (text output only)" } },
    output: TEXT_OR_JSON,
    config: false,
  },
  version: {
    synopsis: "[flags]",
    summary: "the version, the git commit it was built from, the Deno version",
    flags: {},
    output: TEXT_OR_JSON,
    config: false,
  },
  help: {
    synopsis: "[COMMAND]",
    summary: "the commands, or one command's purpose and flags",
    about: "The commands, or one command's purpose and flags: `ckpt-agent help COMMAND` is " +
      "`ckpt-agent COMMAND --help`.",
    flags: {},
    config: false,
  },
} satisfies Record<string, CommandSpec>;

export type CommandName = keyof typeof COMMANDS;

export function isCommandName(name: string): name is CommandName {
  return Object.hasOwn(COMMANDS, name);
}

/** What `ckpt-agent` alone, or with flags first (`ckpt-agent --once`), runs. */
export const DEFAULT_COMMAND: CommandName = "run";

/**
 * Flags that stand for a command, as command-line tools take them: first on the line, the
 * command with the flags that follow (`ckpt-agent -V --output json`); --help also after a
 * command, for that command's help.
 */
export interface Shorthand {
  flags: readonly string[];
  command: CommandName;
  help: string;
}

export const SHORTHANDS: readonly Shorthand[] = [
  {
    flags: ["--help", "-h"],
    command: "help",
    help: "the commands and the default command's flags; after a command, that command's help",
  },
  {
    flags: ["--version", "-V"],
    command: "version",
    help: "the version, as the version command prints it (its flags may follow)",
  },
];

/** The shorthand `arg` is, if any. */
export function shorthandOf(arg: string): Shorthand | undefined {
  return SHORTHANDS.find((s) => s.flags.includes(arg));
}

type Spec<N extends CommandName> = (typeof COMMANDS)[N];

/** The commands that print a result, and so take --output. */
export type OutputCommand = {
  [N in CommandName]: Spec<N> extends { output: OutputFormats } ? N : never;
}[CommandName];

type FlagsOf<N extends CommandName> =
  & Spec<N>["flags"]
  & (N extends OutputCommand ? ReturnType<typeof outputFlags> : unknown);

/** A command's own flags: those of its entry, then --output and --json when it prints a result. */
export function commandFlags<N extends CommandName>(name: N): FlagsOf<N> {
  const spec: CommandSpec = COMMANDS[name];
  return { ...spec.flags, ...(spec.output ? outputFlags(spec.output) : {}) } as FlagsOf<N>;
}

/** parseArgs's options for a command's own flags. */
export function commandOptions<N extends CommandName>(name: N) {
  return flagOptions(commandFlags(name) as FlagsOf<N> & Flags);
}

/** The format a command's parsed --output and --json ask for. */
export function commandOutput(
  name: OutputCommand,
  values: { output?: unknown; json?: unknown },
): OutputFormat {
  return outputFormat(values, COMMANDS[name].output);
}
