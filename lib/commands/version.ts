/**
 * `ckpt-agent version` (also `ckpt-agent --version`, `-V`): the agent's version, the Deno it runs
 * on, and the git commit it was built from (lib/version_info.ts).
 */
import { commandOptions, commandOutput } from "../cli/commands.ts";
import { EXIT_OK } from "../cli/errors.ts";
import { parseFlags } from "../config/flags.ts";
import { versionInfo } from "../version_info.ts";

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
