/** `ckpt-agent version`: what it prints, where the commit comes from, and what it never reads. */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { fileURLToPath } from "node:url";
import denoJson from "../../deno.json" with { type: "json" };
import { BUILD_COMMIT } from "../../lib/build_info.ts";
import { buildInfoSource } from "../../scripts/compile.ts";
import { agentDenoFlags } from "../../scripts/permissions.ts";
import { runCli } from "../helpers/cli.ts";

const REPO = fileURLToPath(new URL("../../", import.meta.url)).replace(/\/$/, "");

async function head(): Promise<string> {
  const out = await new Deno.Command("git", { args: ["-C", REPO, "rev-parse", "HEAD"] }).output();
  assert(out.success, "the tests run in a git work tree");
  return new TextDecoder().decode(out.stdout).trim();
}

Deno.test("version --output json: the version, the Deno version and the commit, from git in a source tree", async () => {
  const run = await runCli(["version", "--output", "json"]);
  assertEquals(run.code, 0, run.stderr);
  const info = JSON.parse(run.stdout);
  assertEquals(Object.keys(info).sort(), ["commit", "deno", "version"]);
  assertEquals(info.version, denoJson.version);
  assertEquals(info.deno, Deno.version.deno);
  const sha = await head();
  assert(info.commit === sha || info.commit === `${sha}-dirty`, info.commit);
});

Deno.test("version prints one line each for the version, the commit and the Deno version", async () => {
  const run = await runCli(["version"]);
  assertEquals(run.code, 0, run.stderr);
  const lines = run.stdout.trimEnd().split("\n");
  assertEquals(lines.length, 3);
  assertEquals(lines[0], `ckpt-agent ${denoJson.version}`);
  assert(lines[1].startsWith("commit     ") && lines[1].includes(await head()), lines[1]);
  assertEquals(lines[2], `deno       ${Deno.version.deno}`);
});

Deno.test("--version and -V print what version prints, and take its flags", async () => {
  const [plain, json] = await Promise.all([
    runCli(["version"]),
    runCli(["version", "--output", "json"]),
  ]);
  for (const flag of ["--version", "-V"]) {
    const [text, asJson] = await Promise.all([
      runCli([flag]),
      runCli([flag, "--json"]),
    ]);
    assertEquals([flag, text.code, text.stderr, text.stdout], [flag, 0, "", plain.stdout]);
    assertEquals([flag, asJson.code, asJson.stdout], [flag, 0, json.stdout]);
  }
  // After a command it is no shorthand: that command's flags are its own.
  const after = await runCli(["status", "--version"]);
  assertEquals(after.code, 2);
});

Deno.test("with the compiled binary's permissions version runs no git, and reads no file of the tree", async () => {
  // Imports are not reads: deno.json is embedded; any read of the tree at run time would fail.
  const run = await runCli(["version", "--output", "json"], {
    denoFlags: [...agentDenoFlags(), `--deny-read=${REPO}`],
  });
  assertEquals(run.code, 0, run.stderr);
  const info = JSON.parse(run.stdout);
  assertEquals(info.commit, "unknown");
  assertEquals(info.version, denoJson.version);
});

Deno.test("the checked-in build info is what the build writes, without a commit", async () => {
  assertEquals(BUILD_COMMIT, undefined);
  assertEquals(await Deno.readTextFile(`${REPO}/lib/build_info.ts`), buildInfoSource(undefined));
});
