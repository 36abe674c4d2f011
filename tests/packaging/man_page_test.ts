/**
 * docs/ckpt-agent.8, the manual page install.sh and the package install: it is what
 * scripts/man_page.ts writes; man and groff read it without a warning; it has the sections a
 * manual page has, every command and flag the help prints, every environment variable the code
 * reads (and no other), every exit status the commands return; and the unit's Documentation=
 * names it.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { commandHelp } from "../../lib/cli/help.ts";
import { type CommandName, COMMANDS } from "../../lib/cli/commands.ts";
import * as errors from "../../lib/cli/errors.ts";
import { PROXY_VARIABLES } from "../../lib/util/direct_http.ts";
import { ENVIRONMENT, exitStatuses, manPage, roffText } from "../../scripts/man_page.ts";
import { MAN_PAGE_FILE, REPO, run, UNIT_FILE } from "./tools.ts";

const SECTIONS = [
  "NAME",
  "SYNOPSIS",
  "DESCRIPTION",
  "COMMANDS",
  "OPTIONS",
  "FILES",
  "ENVIRONMENT",
  "EXIT STATUS",
  "SEE ALSO",
];

async function committed(): Promise<string> {
  return await Deno.readTextFile(MAN_PAGE_FILE);
}

Deno.test("the committed page is what scripts/man_page.ts writes", async () => {
  const { version } = JSON.parse(await Deno.readTextFile(`${REPO}/deno.json`));
  assert(
    await committed() === manPage(version),
    "docs/ckpt-agent.8 differs from what the command table and settings make: run " +
      "`deno run -A scripts/man_page.ts`",
  );
});

Deno.test("man --warnings and groff -ww read the page without a warning", async () => {
  const env = { MANWIDTH: "80", LC_ALL: "C.UTF-8" };
  const man = await run("man", ["--warnings", "-E", "UTF-8", "-l", MAN_PAGE_FILE], { env });
  assertEquals({ code: man.code, warnings: man.stderr }, { code: 0, warnings: "" });
  const groff = await run("groff", ["-man", "-ww", "-z", MAN_PAGE_FILE]);
  assertEquals({ code: groff.code, output: groff.stdout + groff.stderr }, { code: 0, output: "" });
  // The rendered page has each section, in order.
  const headings = man.stdout.split("\n").filter((line) => /^[A-Z][A-Z ]+$/.test(line));
  assertEquals(headings, SECTIONS);
});

Deno.test("every command and every flag its help prints is on the page", async () => {
  const page = await committed();
  for (const name of Object.keys(COMMANDS) as CommandName[]) {
    assert(page.includes(`\n.TP\n\\fB${name}\\fR `), name);
    for (const [, flag] of commandHelp(name).matchAll(/^ {2}--([a-z-]+)/gm)) {
      assert(page.includes(`\\fB${roffText(`--${flag}`)}\\fR`), `${name} --${flag}`);
    }
  }
});

/** The variables a source file reads, in the ways the code reads them. */
function variablesRead(source: string): string[] {
  const names: string[] = [];
  for (
    const pattern of [
      /Deno\.env\.(?:get|has)\("([A-Za-z_][A-Za-z0-9_]*)"\)/g,
      /envValue\(env, "([A-Za-z_][A-Za-z0-9_]*)"\)/g,
    ]
  ) {
    names.push(...[...source.matchAll(pattern)].map((m) => m[1]));
  }
  // firstSet(env, ["HTTPS_PROXY", "https_proxy"]): each name in the list.
  for (const [, list] of source.matchAll(/firstSet\(env, ([^)]*)\)/g)) {
    names.push(...[...list.matchAll(/"([A-Za-z_][A-Za-z0-9_]*)"/g)].map((m) => m[1]));
  }
  return names;
}

async function sourcesUnder(dir: string): Promise<string[]> {
  const files: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory) files.push(...await sourcesUnder(path));
    else if (entry.name.endsWith(".ts")) files.push(path);
  }
  return files;
}

Deno.test("ENVIRONMENT names every variable the program reads, and only those", async () => {
  const read = new Set<string>(PROXY_VARIABLES);
  // The simulated cluster and the demo run no real node: what they read is not the agent's.
  const files = (await sourcesUnder(`${REPO}/lib`)).filter((f) => !/\/lib\/(sim|demo)\//.test(f));
  for (const file of [...files, `${REPO}/main.ts`]) {
    for (const name of variablesRead(await Deno.readTextFile(file))) read.add(name);
  }
  assert(
    read.has("WATCHDOG_USEC") && read.has("NO_PROXY") && read.has("POD_NAME"),
    [...read].join(" "),
  );
  const documented = ENVIRONMENT.flatMap(([names]) => names);
  assertEquals(new Set(documented).size, documented.length, "each variable once");
  assertEquals([...read].sort(), [...documented].sort());
});

Deno.test("EXIT STATUS lists every status a command returns", async () => {
  const listed = new Set(exitStatuses().map(([status]) => status));
  const returned = new Set<number>([
    ...Object.entries(errors).filter(([name]) => name.startsWith("EXIT_")).map(([, v]) =>
      v as number
    ),
    ...Object.values(errors.SIGNAL_EXIT),
  ]);
  const commandFiles = await sourcesUnder(`${REPO}/lib/commands`);
  for (const file of [...commandFiles, `${REPO}/main.ts`]) {
    const source = await Deno.readTextFile(file);
    for (const [, n] of source.matchAll(/\breturn (\d+);/g)) returned.add(Number(n));
  }
  assert(returned.has(130) && returned.has(errors.EXIT_LOCKED), [...returned].join(" "));
  for (const status of returned) assert(listed.has(status), `exit status ${status}`);
});

Deno.test("the unit's Documentation= is this page", async () => {
  const unit = await Deno.readTextFile(UNIT_FILE);
  const documentation = unit.split("\n").filter((line) => line.startsWith("Documentation="));
  assertEquals(documentation, ["Documentation=man:ckpt-agent(8)"]);
  assert((await committed()).startsWith(".TH CKPT\\-AGENT 8 "));
});
