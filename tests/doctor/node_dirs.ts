/** The configured directories of a node under a temp root, for doctor's tests. */
import { join } from "node:path";
import { defaultConfig } from "../../lib/config/load.ts";
import type { Config } from "../../lib/config/types.ts";

export function nodeDirs(root: string): Config {
  return {
    ...defaultConfig("cp-1"),
    staticPodDir: join(root, "etc/kubernetes/manifests"),
    inactiveDir: join(root, "etc/kubernetes/inactive-manifests"),
    secretsDir: join(root, "etc/kubernetes/checkpoint-secrets"),
    configmapsDir: join(root, "etc/kubernetes/checkpoint-configmaps"),
    stateDir: join(root, "var/lib/ckpt-agent"),
    lockFile: join(root, "run/ckpt-agent/lock"),
  };
}

/** The layout install.sh makes, and the unit's runtime directory as systemd makes it. */
export async function installDirs(config: Config): Promise<void> {
  for (
    const dir of [config.inactiveDir, config.secretsDir, config.configmapsDir, config.stateDir]
  ) {
    await Deno.mkdir(dir, { recursive: true });
    await Deno.chmod(dir, 0o700);
  }
  await Deno.mkdir(config.staticPodDir, { recursive: true });
  await Deno.chmod(config.staticPodDir, 0o755);
  await Deno.mkdir(join(config.lockFile, ".."), { recursive: true });
  await Deno.chmod(join(config.lockFile, ".."), 0o700);
}
