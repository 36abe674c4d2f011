/**
 * `ckpt-agent config [--config FILE] [flags]`: validates the configuration and prints the
 * effective one as YAML, so an operator can check a file before restarting the agent. The
 * output is itself a valid configuration file.
 */
import { stringify } from "yaml";
import { configAsYamlSettings, loadConfig } from "../config/load.ts";
import { DEFAULT_CONFIG_FILE } from "../config/settings.ts";
import { selfIdOf } from "../core/self.ts";

export async function configCommand(args: string[]): Promise<number> {
  const { config, file } = await loadConfig(args);
  const header = [
    `# ckpt-agent effective configuration: defaults, ${
      file ?? `no file (${DEFAULT_CONFIG_FILE} absent)`
    }, flags`,
    ...(config.self
      ? [`# self (from POD_NAMESPACE, POD_NAME, NODE_NAME): ${selfIdOf(config.self)}`]
      : []),
  ];
  console.log(`${header.join("\n")}\n${stringify(configAsYamlSettings(config)).trimEnd()}`);
  return 0;
}
