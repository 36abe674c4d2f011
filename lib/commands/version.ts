/**
 * `ckpt-agent version`: the agent's version (deno.json, embedded at build time), the Deno it
 * runs on, and the git commit it was built from.
 */
import { fileURLToPath } from "node:url";
import denoJson from "../../deno.json" with { type: "json" };
import { BUILD_COMMIT } from "../build_info.ts";
import { commandOptions, commandOutput } from "../cli/commands.ts";
import { EXIT_OK } from "../cli/errors.ts";
import { parseFlags } from "../config/flags.ts";
import { gitCommit } from "../git_commit.ts";

export interface VersionInfo {
  version: string;
  deno: string;
  /** `<sha>`, `<sha>-dirty`, or `unknown`. */
  commit: string;
}

/**
 * Stamped in by the build; from a source tree, asked of git, but only when the process may run
 * git already (`deno task agent`): the version command never prompts for a permission.
 */
async function commit(): Promise<string> {
  if (BUILD_COMMIT) return BUILD_COMMIT;
  const here = new URL(".", import.meta.url);
  const mayRunGit = here.protocol === "file:" &&
    (await Deno.permissions.query({ name: "run", command: "git" })).state === "granted";
  return (mayRunGit ? await gitCommit(fileURLToPath(here)) : undefined) ?? "unknown";
}

export async function versionInfo(): Promise<VersionInfo> {
  return { version: denoJson.version, deno: Deno.version.deno, commit: await commit() };
}

export async function versionCommand(args: string[]): Promise<number> {
  const { values } = parseFlags(args, commandOptions("version"));
  const output = commandOutput("version", values);
  const info = await versionInfo();
  console.log(
    output === "json"
      ? JSON.stringify(info)
      : `ckpt-agent ${info.version}\ncommit     ${info.commit}\ndeno       ${info.deno}`,
  );
  return EXIT_OK;
}
