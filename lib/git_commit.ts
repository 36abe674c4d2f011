/**
 * The commit a source tree is at, from git: `<sha>`, or `<sha>-dirty` when tracked files differ
 * from it. For the build and for `ckpt-agent version` run from source; the compiled agent has no
 * permission to run git and is never asked to.
 */
async function git(dir: string, args: string[]): Promise<string | undefined> {
  try {
    const out = await new Deno.Command("git", {
      args: ["-C", dir, ...args],
      stdin: "null",
      stdout: "piped",
      stderr: "null",
    }).output();
    return out.success ? new TextDecoder().decode(out.stdout).trim() : undefined;
  } catch {
    // No git, or not allowed to run it.
    return undefined;
  }
}

/** Undefined when `dir` is not in a git work tree or git cannot be run. */
export async function gitCommit(dir: string): Promise<string | undefined> {
  const sha = await git(dir, ["rev-parse", "HEAD"]);
  if (!sha) return undefined;
  const changes = await git(dir, ["status", "--porcelain", "--untracked-files=no"]);
  return changes ? `${sha}-dirty` : sha;
}
