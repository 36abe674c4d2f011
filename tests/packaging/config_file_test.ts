/**
 * systemd/config.yaml, installed as /etc/ckpt-agent/config.yaml: as shipped it sets nothing, and
 * every setting is written out as a comment "# key: default" that is YAML once uncommented.
 * and those defaults are the loader's own.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { parse as parseYaml } from "yaml";
import { DEFAULTS, loadConfig } from "../../lib/config/load.ts";
import { CONFIG_FILE } from "./tools.ts";

const KEY_LINE = /^# ([A-Za-z]+):( .*)?$/;

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
