/**
 * What this agent is: its version (deno.json, embedded at build time), the git commit it was
 * built from, and the Deno it runs on. `ckpt-agent version` prints it; the admin endpoint exports
 * it as ckpt_agent_build_info.
 */
import { fileURLToPath } from "node:url";
import denoJson from "../deno.json" with { type: "json" };
import { BUILD_COMMIT } from "./build_info.ts";
import { gitCommit } from "./git_commit.ts";

export interface VersionInfo {
  version: string;
  deno: string;
  /** `<sha>`, `<sha>-dirty`, or `unknown`. */
  commit: string;
}

/**
 * Stamped in by the build; from a source tree, asked of git, but only when the process may run
 * git already (`deno task agent`): asking never prompts for a permission.
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
