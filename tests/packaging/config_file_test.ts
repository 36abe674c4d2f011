/**
 * systemd/config.yaml, installed as /etc/ckpt-agent/config.yaml: as shipped it sets nothing, and
 * every setting is written out as a comment "# key: default" that is YAML once uncommented.
 * (Whether those defaults are the loader's is checked against the loader itself.)
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { parse as parseYaml } from "yaml";
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
