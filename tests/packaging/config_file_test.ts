/**
 * systemd/config.yaml, installed as /etc/ckpt-agent/config.yaml: written from the settings table
 * by scripts/config_file.ts; as shipped it sets nothing, every setting is written out as a
 * comment "# key: default" that is YAML once uncommented, and those defaults are the loader's
 * own.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { parse as parseYaml } from "yaml";
import { defaultConfigFile } from "../../lib/config/config_file.ts";
import { DEFAULTS, loadConfig } from "../../lib/config/load.ts";
import { SETTING_KEYS, SETTINGS } from "../../lib/config/settings.ts";
import { CONFIG_FILE } from "./tools.ts";

const KEY_LINE = /^# ([A-Za-z]+):( .*)?$/;

Deno.test("the shipped config is what the settings table writes", async () => {
  const shipped = await Deno.readTextFile(CONFIG_FILE);
  assert(
    shipped === defaultConfigFile(),
    "systemd/config.yaml differs from the settings table: run `deno run -A scripts/config_file.ts`",
  );
});

Deno.test("each setting's comment gives its flag, and its default when the value line cannot", () => {
  const blocks = defaultConfigFile().split("\n\n").slice(1);
  assertEquals(blocks.length, SETTING_KEYS.length);
  for (const [i, key] of SETTING_KEYS.entries()) {
    const setting = SETTINGS[key];
    const lines = blocks[i].trimEnd().split("\n");
    assert(lines.every((line) => line.length <= 100), blocks[i]);
    assert(lines.at(-1)!.startsWith(`# ${key}:`), blocks[i]);
    // A comment line that looked like "# key: value" would be read as a setting once uncommented.
    for (const line of lines.slice(0, -1)) assert(!KEY_LINE.test(line), line);
    const comment = lines.slice(0, -1).map((line) => line.slice(2)).join(" ");
    assert(comment.includes(`[--${setting.flag}`), comment);
    if (setting.defaultText !== undefined) {
      assert(comment.includes(`default: ${setting.defaultText}`), comment);
    }
  }
});

Deno.test("the shipped config sets nothing: every line is a comment or blank", async () => {
  const text = await Deno.readTextFile(CONFIG_FILE);
  for (const line of text.split("\n")) assert(line === "" || line.startsWith("#"), line);
  assertEquals(parseYaml(text), null);
});

Deno.test("each setting appears once as '# key: default', in a form YAML reads", async () => {
  const keys = (await Deno.readTextFile(CONFIG_FILE)).split("\n")
    .filter((line) => KEY_LINE.test(line));
  assert(keys.length >= 20, `only ${keys.length} settings`);
  // uniqueKeys (the default) makes a repeated key an error.
  const uncommented = parseYaml(keys.map((line) => line.slice(2)).join("\n"));
  assertEquals(Object.keys(uncommented).length, keys.length);
  for (const line of keys) {
    const value = parseYaml(line.slice(2));
    assert(typeof value === "object" && value !== null, line);
  }
});

Deno.test("the shipped defaults are the loader's, and every key the loader knows is shipped", async () => {
  const lines = (await Deno.readTextFile(CONFIG_FILE)).split("\n").filter((l) => KEY_LINE.test(l));
  const shipped = parseYaml(lines.map((line) => line.slice(2)).join("\n")) as Record<
    string,
    unknown
  >;
  const withDefault = Object.fromEntries(
    Object.entries(shipped).filter(([key]) => key in DEFAULTS),
  );
  assertEquals(withDefault, DEFAULTS);
  // The keys without a literal default are written "# key:" and load as nothing.
  assertEquals(
    Object.keys(shipped).filter((key) => !(key in DEFAULTS)).sort(),
    ["kubeletCaFile", "kubeletReadonlyUrl", "nodeName"],
  );
  // Uncommented as shipped, the file loads, and gives exactly the built-in configuration.
  const dir = await Deno.makeTempDir();
  try {
    const file = `${dir}/config.yaml`;
    await Deno.writeTextFile(
      file,
      lines.map((l) => l.slice(2)).filter((l) => !/:$/.test(l)).join("\n"),
    );
    const opts = { env: {}, hostname: () => "node-1" };
    const fromFile = await loadConfig(["--config", file], opts);
    // No file at all: a missing default config file is fine.
    const builtIn = await loadConfig([], { ...opts, defaultConfigFile: `${dir}/absent.yaml` });
    assertEquals(fromFile.config, builtIn.config);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
