/**
 * `ckpt-agent help`, `--help`, `help COMMAND` and `COMMAND --help`, as subprocesses: written from
 * the command table and the settings table, so every flag appears with its default.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { commandFlags, type CommandName, COMMANDS, SHORTHANDS } from "../../lib/cli/commands.ts";
import {
  CONFIG_FILE_FLAG,
  defaultText,
  SETTING_KEYS,
  SETTINGS,
} from "../../lib/config/settings.ts";
import { runCli } from "../helpers/cli.ts";

const NAMES = Object.keys(COMMANDS) as CommandName[];

/** Each flag's entry: `--flag [ARG]` to its help, the indented lines below it joined. */
function flagEntries(help: string): Map<string, string> {
  const entries = new Map<string, string>();
  let current: string | undefined;
  for (const line of help.split("\n")) {
    const head = /^ {2}--([a-z-]+)/.exec(line);
    if (head) {
      current = head[1];
      entries.set(current, "");
    } else if (current !== undefined && line.startsWith("      ")) {
      entries.set(current, `${entries.get(current)} ${line.trim()}`.trim());
    } else {
      current = undefined;
    }
  }
  return entries;
}

/** Every setting's flag is there with its argument and its default, and --config too. */
function assertListsEverySetting(help: string) {
  const entries = flagEntries(help);
  for (const key of SETTING_KEYS) {
    const setting = SETTINGS[key];
    const entry = entries.get(setting.flag);
    assert(entry !== undefined, `--${setting.flag} missing`);
    assert(entry.includes(setting.help), `--${setting.flag}: ${entry}`);
    assert(entry.endsWith(`(default: ${defaultText(setting)})`), `--${setting.flag}: ${entry}`);
    const { arg, repeatable } = setting.kind;
    const head = `  --${setting.flag}${arg ? ` ${arg}` : ""}${repeatable ? " (repeatable)" : ""}`;
    assert(help.split("\n").includes(head), head);
  }
  assert(entries.get("config")?.endsWith(`(default: ${CONFIG_FILE_FLAG.default})`));
}

async function help(args: string[]): Promise<string> {
  const r = await runCli(args);
  assertEquals([r.code, r.stderr], [0, ""], args.join(" "));
  assert(r.stdout.split("\n").every((line) => line.length <= 100), args.join(" "));
  return r.stdout;
}

Deno.test("run --help lists every setting with its default, as --once --help and help run do", async () => {
  const [run, once, helpRun] = await Promise.all([
    help(["run", "--help"]),
    help(["--once", "--help"]),
    help(["help", "run"]),
  ]);
  assert(run.startsWith("usage: ckpt-agent [run] [flags]\n"), run);
  assertListsEverySetting(run);
  for (const flag of ["once", "dry-run"]) assert(flagEntries(run).has(flag), flag);
  assert(flagEntries(run).get("output")?.endsWith("(default: text)"));
  assertEquals(once, run);
  assertEquals(helpRun, run);
});

Deno.test("help, --help and -h: every command, then the default command's flags and every setting", async () => {
  const [plain, long, short] = await Promise.all([
    help(["help"]),
    help(["--help"]),
    help(["-h"]),
  ]);
  assert(plain.startsWith("usage: ckpt-agent [COMMAND] [flags]\n"), plain);
  assertEquals(long, plain);
  assertEquals(short, plain);
  for (const name of NAMES) assert(plain.includes(`\n  ${name} `), name);
  for (const { flags, help } of SHORTHANDS) {
    const entry = flagEntries(plain).get(flags[0].slice(2));
    assert(plain.includes(`\n  ${flags.join(", ")}\n`), flags[0]);
    assertEquals(entry, help);
  }
  assertListsEverySetting(plain);
});

Deno.test("each command's help: its purpose, its own flags, and the settings when it takes the configuration", async () => {
  await Promise.all(NAMES.map(async (name) => {
    const [viaHelp, viaFlag] = await Promise.all([
      help(["help", name]),
      help([name, "--help"]),
    ]);
    assertEquals(viaFlag, viaHelp);
    assert(viaHelp.includes(COMMANDS[name].synopsis), name);
    const entries = flagEntries(viaHelp);
    for (const flag of Object.keys(commandFlags(name))) {
      assert(entries.has(flag), `${name} --${flag}`);
    }
    if (COMMANDS[name].config) assertListsEverySetting(viaHelp);
    else assert(!entries.has("config") && !entries.has("kubeconfig"), name);
  }));
});

Deno.test("a command's help prints before its flags or its configuration are looked at", async () => {
  const r = await runCli(["status", "--config", "/nonexistent/config.yaml", "--bogus", "-h"]);
  assertEquals(r.code, 0, r.stderr);
  assert(r.stdout.startsWith("usage: ckpt-agent status"), r.stdout);
});

Deno.test("an unknown command, or help for one, exits 2 naming it", async () => {
  const unknown = await runCli(["bogus"]);
  assertEquals([unknown.code, unknown.stdout], [2, ""]);
  const [first, ...rest] = unknown.stderr.split("\n");
  assertEquals(first, 'ckpt-agent: unknown command "bogus"');
  // Followed by the list of commands to choose from.
  for (const name of NAMES) assert(rest.some((line) => line.startsWith(`  ${name} `)), name);

  const helpUnknown = await runCli(["help", "bogus"]);
  assertEquals(
    [helpUnknown.code, helpUnknown.stdout, helpUnknown.stderr],
    [2, "", 'ckpt-agent help: unknown command "bogus"\n'],
  );
});
