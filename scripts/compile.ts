/**
 * `deno task compile [--output PATH]`: builds the single binary (default dist/ckpt-agent) with
 * `deno compile` and exactly the agent's permissions (scripts/permissions.ts).
 *
 * The commit must be inside the binary, which cannot run git: the files the binary is built from
 * (main.ts, lib/, deno.json, deno.lock) are copied into a temp directory, the copy's
 * lib/build_info.ts is written with the commit, and the copy is compiled. The work tree is never
 * modified, even by a build that fails or is interrupted.
 *
 * `deno compile` embeds the program in `denort`, the runtime-only Deno of the same version, which
 * it downloads from dl.deno.land on first use and caches in DENO_DIR. Without internet, point
 * DENORT_BIN at a denort binary of that version: `deno compile` reads the variable itself.
 */
import { cp, mkdir } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { gitCommit } from "../lib/git_commit.ts";
import { agentDenoFlags } from "./permissions.ts";
import { lockedNpmPackages } from "./npm_cache.ts";

const REPO = fileURLToPath(new URL("..", import.meta.url));

/** What the binary is built from; nothing else of the tree is needed at build or run time. */
const SOURCES = ["main.ts", "deno.json", "deno.lock", "lib"];

/** The content of lib/build_info.ts in a build; with `undefined`, the checked-in file. */
export function buildInfoSource(commit: string | undefined): string {
  return `/**
 * What the build knows and the compiled binary cannot find out: it runs no git and reads no file
 * of the source tree. scripts/compile.ts writes this file anew, with the commit, into the copy of
 * the tree it compiles; the checked-in file says nothing, and \`ckpt-agent version\` run from a
 * source tree asks git instead (lib/git_commit.ts).
 */
export const BUILD_COMMIT: string | undefined = ${
    commit === undefined ? "undefined" : JSON.stringify(commit)
  };
`;
}

export function compileArgs(output: string, exclude: string[]): string[] {
  return [
    "compile",
    "--frozen",
    ...agentDenoFlags(),
    ...exclude.map((path) => `--exclude=${path}`),
    "--output",
    output,
    "main.ts",
  ];
}

const TEST_DIRS = ["test", "tests", "spec", "specs"];

/**
 * The test directories of the npm packages the lock file pins, in Deno's npm cache. `deno
 * compile` runs its CommonJS export analysis on every file of every package it embeds, and its
 * parser overflowed the stack on the test data of bintrees (once a dependency: 100,000 lines of
 * numbers, which parse as one long expression): the build crashed. Tests are never loaded at run
 * time; they are left out.
 */
async function npmTestDirs(lockFile: string): Promise<string[]> {
  const dirs: string[] = [];
  for (const { dir: pkg } of await lockedNpmPackages(lockFile)) {
    for (const test of TEST_DIRS) {
      const dir = join(pkg, test);
      if ((await Deno.stat(dir).catch(() => undefined))?.isDirectory) dirs.push(dir);
    }
  }
  return dirs;
}

async function compile(output: string): Promise<number> {
  const commit = await gitCommit(REPO) ?? "unknown";
  const copy = await Deno.makeTempDir({ prefix: "ckpt-agent-build-" });
  try {
    for (const source of SOURCES) {
      await cp(join(REPO, source), join(copy, source), { recursive: true });
    }
    await Deno.writeTextFile(join(copy, "lib/build_info.ts"), buildInfoSource(commit));
    await mkdir(dirname(output), { recursive: true });
    const { code } = await new Deno.Command(Deno.execPath(), {
      args: compileArgs(output, await npmTestDirs(join(copy, "deno.lock"))),
      cwd: copy,
      stdin: "null",
      stdout: "inherit",
      stderr: "inherit",
    }).spawn().status;
    if (code !== 0) {
      console.error(
        `compile: deno compile failed (exit ${code}). It needs denort ${Deno.version.deno}: ` +
          "internet access to dl.deno.land on first use, or DENORT_BIN set to a denort binary " +
          "of that version (see docs/building.md).",
      );
      return 1;
    }
    console.log(`compile: built ${output} from commit ${commit}`);
    return 0;
  } finally {
    await Deno.remove(copy, { recursive: true });
  }
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: { output: { type: "string", default: "dist/ckpt-agent" } },
  });
  Deno.exit(await compile(resolve(Deno.cwd(), values.output!)));
}
