/** The commit of a source tree, as the build stamps it and `version` reports it from source. */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { join } from "node:path";
import { gitCommit } from "../lib/git_commit.ts";
import { withTempDir } from "./helpers/temp_dir.ts";

async function git(dir: string, ...args: string[]): Promise<string> {
  const out = await new Deno.Command("git", {
    args: ["-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com", ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) throw new Error(new TextDecoder().decode(out.stderr));
  return new TextDecoder().decode(out.stdout).trim();
}

Deno.test("gitCommit: the HEAD commit, -dirty when a tracked file differs, undefined outside a repository", async () => {
  await withTempDir(async (dir) => {
    assertEquals(await gitCommit(dir), undefined);
    await git(dir, "init", "-q");
    assertEquals(await gitCommit(dir), undefined, "no commit yet");
    await Deno.writeTextFile(join(dir, "a.txt"), "one\n");
    await git(dir, "add", "a.txt");
    await git(dir, "commit", "-q", "-m", "first");
    const sha = await git(dir, "rev-parse", "HEAD");
    assertEquals(await gitCommit(dir), sha);
    await Deno.writeTextFile(join(dir, "untracked.txt"), "not part of the build\n");
    assertEquals(await gitCommit(dir), sha, "untracked files do not count");
    await Deno.writeTextFile(join(dir, "a.txt"), "two\n");
    assertEquals(await gitCommit(dir), `${sha}-dirty`);
  });
});
