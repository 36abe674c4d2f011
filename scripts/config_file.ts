/**
 * `deno run -A scripts/config_file.ts`: writes systemd/config.yaml from the settings table
 * (lib/config/settings.ts). tests/packaging/config_file_test.ts fails until the committed file is
 * what this writes.
 */
import { defaultConfigFile } from "../lib/config/config_file.ts";

await Deno.writeTextFile(new URL("../systemd/config.yaml", import.meta.url), defaultConfigFile());
