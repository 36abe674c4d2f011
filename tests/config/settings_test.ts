/**
 * The settings table (lib/config/settings.ts) against what is derived from it by hand: README.md's
 * configuration table. The loader, the help and the config file are derived in code and tested
 * where they are used.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { defaultConfig, DEFAULTS, loadConfig } from "../../lib/config/load.ts";
import { defaultText, SETTING_KEYS, type SettingKey, SETTINGS } from "../../lib/config/settings.ts";

const README = new URL("../../README.md", import.meta.url);

/** The rows of the README table whose header starts with `header`, as trimmed cells. */
async function markdownTable(header: string): Promise<string[][]> {
  const lines = (await Deno.readTextFile(README)).split("\n");
  const start = lines.findIndex((line) => line.startsWith(header));
  assert(start >= 0, `README.md has no table starting ${header}`);
  const end = lines.findIndex((line, i) => i > start && !line.startsWith("|"));
  return lines.slice(start + 2, end).map((line) =>
    line.split("|").slice(1, -1).map((cell) => cell.trim())
  );
}

/** The README row a setting should have: key, flag, default, meaning. */
function readmeRow(key: SettingKey): string[] {
  const setting = SETTINGS[key];
  return [
    `\`${key}\``,
    `\`--${setting.flag}\`${setting.kind.repeatable ? " (repeatable)" : ""}`,
    setting.defaultText ?? `\`${defaultText(setting)}\``,
    setting.help,
  ];
}

Deno.test("README's configuration table is the settings table: every setting, flag, default and meaning", async () => {
  const rows = await markdownTable("| YAML key");
  assertEquals(rows, SETTING_KEYS.map(readmeRow));
});

Deno.test("every setting has a default or says what it is without one", () => {
  for (const key of SETTING_KEYS) {
    const setting = SETTINGS[key];
    assert(setting.default !== undefined || setting.defaultText !== undefined, key);
    assert(!setting.help.includes("\n") && setting.help.length <= 110, key);
  }
  // Only the node name, derived from the host, and the settings that are off when unset.
  assertEquals(
    SETTING_KEYS.filter((key) => !(key in DEFAULTS)),
    ["nodeName", "kubeletReadonlyUrl", "kubeletCaFile"],
  );
});

Deno.test("flags and Config fields are each one setting's", () => {
  const flags = SETTING_KEYS.map((key) => SETTINGS[key].flag);
  const fields = SETTING_KEYS.map((key) => SETTINGS[key].field);
  assertEquals(new Set(flags).size, flags.length);
  assertEquals(new Set(fields).size, fields.length);
  assert(!flags.includes("config"), "--config names the file, it is no setting");
});

Deno.test("defaultConfig is what loading no file, no flag and no environment gives", async () => {
  const loaded = await loadConfig([], {
    env: {},
    hostname: () => "cp-1",
    defaultConfigFile: "/nonexistent/ckpt-agent.yaml",
  });
  assertEquals(defaultConfig("cp-1"), loaded.config);
});
