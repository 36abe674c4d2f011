/**
 * `ckpt-agent config [--config FILE] [flags]`: validates the configuration as every command that
 * takes it does (lib/config/load.ts), and prints the effective one as YAML, so an operator can
 * check a file before restarting the agent. The output is itself a valid configuration file;
 * with --output json, its `settings` are.
 */
import { stringify } from "yaml";
import { commandOptions, commandOutput } from "../cli/commands.ts";
import { EXIT_OK } from "../cli/errors.ts";
import { configAsYamlSettings, loadConfig } from "../config/load.ts";
import { DEFAULT_CONFIG_FILE } from "../config/settings.ts";
import { selfIdOf } from "../core/self.ts";

export async function configCommand(args: string[]): Promise<number> {
  const { config, file, extra } = await loadConfig(args, { extraFlags: commandOptions("config") });
  const output = commandOutput("config", extra);
  const settings = configAsYamlSettings(config);
  const self = config.self ? selfIdOf(config.self) : undefined;
  if (output === "json") {
    console.log(JSON.stringify({ file: file ?? null, self: self ?? null, settings }));
    return EXIT_OK;
  }
  const header = [
    `# ckpt-agent effective configuration: defaults, ${
      file ?? `no file (${DEFAULT_CONFIG_FILE} absent)`
    }, flags`,
    ...(self ? [`# self (from POD_NAMESPACE, POD_NAME, NODE_NAME): ${self}`] : []),
  ];
  console.log(`${header.join("\n")}\n${stringify(settings).trimEnd()}`);
  return EXIT_OK;
}
