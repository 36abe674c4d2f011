/**
 * `ckpt-agent help [COMMAND]`, `ckpt-agent --help` and `ckpt-agent COMMAND --help`: written from
 * the command table and, for the commands that take the configuration, the settings table, so
 * that every flag appears with its default and no help text is kept by hand.
 */
import { CONFIG_FILE_FLAG, defaultText, SETTING_KEYS, SETTINGS } from "../config/settings.ts";
import { wrap } from "../config/text.ts";
import {
  commandFlags,
  type CommandName,
  COMMANDS,
  type CommandSpec,
  DEFAULT_COMMAND,
  isCommandName,
  SHORTHANDS,
} from "./commands.ts";
import { EXIT_OK, UsageError } from "./errors.ts";
import type { Flag } from "./flags.ts";

const WIDTH = 100;
const INDENT = "      ";

function paragraph(text: string, indent = ""): string[] {
  return wrap(text, WIDTH - indent.length).map((line) => indent + line);
}

/** A flag as Go's flag package shows one: the flag and its argument, then its help below. */
function flagEntry(head: string, help: string, byDefault?: string): string[] {
  const lines = paragraph(help, INDENT);
  if (byDefault !== undefined) {
    // The default is not broken over two lines: it may be a path to copy.
    const suffix = `(default: ${byDefault})`;
    const last = lines[lines.length - 1];
    if (last.length + 1 + suffix.length <= WIDTH) lines[lines.length - 1] = `${last} ${suffix}`;
    else lines.push(INDENT + suffix);
  }
  return [`  ${head}`, ...lines];
}

function ownFlag(name: string, flag: Flag): string[] {
  return flagEntry(`--${name}${flag.arg ? ` ${flag.arg}` : ""}`, flag.help, flag.default);
}

function settingsSection(): string[] {
  return [
    ...paragraph(
      "configuration (built-in defaults, then the YAML file, then these flags; " +
        "`ckpt-agent config` prints the result):",
    ),
    ...ownFlag(CONFIG_FILE_FLAG.flag, CONFIG_FILE_FLAG),
    ...SETTING_KEYS.flatMap((key) => {
      const setting = SETTINGS[key];
      const { arg, repeatable } = setting.kind;
      const head = `--${setting.flag}${arg ? ` ${arg}` : ""}${repeatable ? " (repeatable)" : ""}`;
      return flagEntry(head, setting.help, defaultText(setting));
    }),
  ];
}

function usageLine(name: CommandName): string {
  return `usage: ckpt-agent ${name === DEFAULT_COMMAND ? `[${name}]` : name} ${
    COMMANDS[name].synopsis
  }`;
}

/** What a command is for: its own paragraph, else its summary as a sentence. */
export function commandAbout(name: CommandName): string {
  const spec: CommandSpec = COMMANDS[name];
  return spec.about ?? `${spec.summary[0].toUpperCase()}${spec.summary.slice(1)}.`;
}

/** What a command is for, its own flags, and the settings' flags when it takes them. */
function commandBody(name: CommandName): string[] {
  const spec = COMMANDS[name];
  const sections = [paragraph(commandAbout(name))];
  const flags = Object.entries(commandFlags(name) as Record<string, Flag>);
  if (flags.length > 0) {
    sections.push([
      "flags:",
      ...flags.flatMap(([flag, description]) => ownFlag(flag, description)),
    ]);
  }
  if (spec.config) sections.push(settingsSection());
  return sections.map((lines) => lines.join("\n"));
}

export function commandHelp(name: CommandName): string {
  return [usageLine(name), ...commandBody(name)].join("\n\n");
}

/** The commands, one line each: also what an unknown command is answered with. */
export function overview(): string {
  const names = Object.keys(COMMANDS) as CommandName[];
  const width = Math.max(...names.map((name) => name.length)) + 2;
  const list = names.flatMap((name) => {
    const [first, ...rest] = paragraph(COMMANDS[name].summary, " ".repeat(width + 2));
    return [`  ${name.padEnd(width)}${first.trimStart()}`, ...rest];
  });
  const shorthands = SHORTHANDS.flatMap(({ flags, help }) => flagEntry(flags.join(", "), help));
  return [
    "usage: ckpt-agent [COMMAND] [flags]",
    ["commands:", ...list].join("\n"),
    ["instead of a command:", ...shorthands].join("\n"),
    `\`ckpt-agent help COMMAND\` or \`ckpt-agent COMMAND --help\`: what a command does, and its flags.`,
  ].join("\n\n");
}

/** The overview, then the default command's help: what `ckpt-agent --help` prints. */
function fullHelp(): string {
  return [
    overview(),
    `Without a command, or with flags first, the command is ${DEFAULT_COMMAND}:`,
    ...commandBody(DEFAULT_COMMAND),
  ].join("\n\n");
}

export function helpCommand(args: string[]): Promise<number> {
  if (args.length > 1) throw new UsageError(`one command at most, not ${args.length}`);
  const [name] = args;
  if (name !== undefined && !isCommandName(name)) {
    throw new UsageError(`unknown command ${JSON.stringify(name)}`);
  }
  console.log(name === undefined ? fullHelp() : commandHelp(name));
  return Promise.resolve(EXIT_OK);
}
