/**
 * The fast loop's selection (scripts/unit_tests.ts), so that it cannot rot either way: the
 * parts of the agent someone changing the planner or the stores works on stay in it, a test
 * that reaches a socket or a process through any import stays out of it, and one that slips in
 * anyway fails there for want of permission.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import denoJson from "../../deno.json" with { type: "json" };
import { selectUnitTests, UNIT_TEST_PERMISSIONS } from "../../scripts/unit_tests.ts";
import { withTempDir } from "../helpers/temp_dir.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const lib = (path: string) => JSON.stringify(new URL(`../../lib/${path}`, import.meta.url).href);
const helper = (path: string) =>
  JSON.stringify(new URL(`../helpers/${path}`, import.meta.url).href);

/**
 * What the fast loop must test, by the names the code gives it rather than by file, so that
 * moving a module does not break this test: the planner, the sanitizer, the plan contract, the
 * configuration, the stores, manifest names, ports and the proxy choice.
 */
const MUST_REACH = [
  "transition",
  "runPass",
  "sanitizeCheckpoint",
  "parseSnapshot",
  "loadConfig",
  "encodeRecord",
  "StatusStore",
  "SandboxStore",
  "assignManifestNames",
  "dropPortDeclarations",
  "chooseProxy",
];

function libFiles(dir = join(ROOT, "lib")): string[] {
  return [...Deno.readDirSync(dir)].flatMap((entry) => {
    const path = join(dir, entry.name);
    return entry.isDirectory ? libFiles(path) : entry.name.endsWith(".ts") ? [path] : [];
  });
}

/** The lib/ module that exports `name`, relative to the repository. */
function exporterOf(name: string): string {
  const declaration = new RegExp(`^export (async )?(function|class|const|let) ${name}\\b`, "m");
  const found = libFiles().filter((file) => declaration.test(Deno.readTextFileSync(file)));
  assertEquals(found.length, 1, `${name} is exported by ${found.length} modules`);
  return found[0].slice(ROOT.length);
}

Deno.test("the fast loop tests the planner, sanitizer, plan contract, configuration, stores, names, ports and proxy choice", async () => {
  const { unit, unitReaches } = await selectUnitTests();
  assert(unit.length > 0);
  const missing = MUST_REACH.filter((name) => !unitReaches.has(exporterOf(name)));
  assertEquals(missing, [], "no test of the fast loop reaches the modules exporting these");
});

Deno.test("a test file reaching a socket or a process, through any import, is not in the fast loop", async () => {
  await withTempDir(async (dir) => {
    const files: Record<string, string> = {
      "pure_test.ts": `import { transition } from ${lib("core/state.ts")};`,
      "address_test.ts": `import { isIP } from "node:net";\n// Deno.serve is only named here.`,
      "type_only_test.ts": `import type { SimPeerOptions } from ${lib("sim/peer.ts")};`,
      "cli_test.ts": `import { runCli } from ${helper("cli.ts")};`,
      "tmpfs_test.ts": `import { Tmpfs } from ${helper("tmpfs.ts")};`,
      "server_test.ts": `Deno.serve(() => new Response(""));`,
      "socket_test.ts": `import net from "node:net";`,
      "peer_test.ts": `import { startSimPeer } from ${lib("sim/peer.ts")};`,
    };
    await Deno.mkdir(join(dir, "nested"));
    for (const [name, text] of Object.entries(files)) {
      await Deno.writeTextFile(join(dir, "nested", name), `${text}\n`);
    }
    const { unit, slow } = await selectUnitTests(dir);
    const names = (paths: Iterable<string>) => [...paths].map((p) => p.split("/").pop()).sort();
    assertEquals(names(unit), ["address_test.ts", "pure_test.ts", "type_only_test.ts"]);
    assertEquals(names(slow.keys()), [
      "cli_test.ts",
      "peer_test.ts",
      "server_test.ts",
      "socket_test.ts",
      "tmpfs_test.ts",
    ]);
    assert(slow.get([...slow.keys()].find((f) => f.endsWith("cli_test.ts"))!)!.includes("process"));
  });
});

Deno.test("the fast loop runs without network or process permissions: a test that needs them fails there", async () => {
  assertEquals(denoJson.tasks["test:unit"].includes("scripts/unit_tests.ts"), true);
  for (const flag of UNIT_TEST_PERMISSIONS) {
    assert(!/^(-A|--allow-all|--allow-net|--allow-run)\b/.test(flag), flag);
  }
  await withTempDir(async (dir) => {
    const attempts = {
      "listens_test.ts": `Deno.test("x", () => { Deno.listen({ port: 0 }).close(); });`,
      "spawns_test.ts": `Deno.test("x", async () => { await new Deno.Command("true").output(); });`,
    };
    for (const [name, text] of Object.entries(attempts)) {
      const file = join(dir, name);
      await Deno.writeTextFile(file, `${text}\n`);
      const out = await new Deno.Command(Deno.execPath(), {
        args: ["test", ...UNIT_TEST_PERMISSIONS, file],
        stdout: "piped",
        stderr: "piped",
        env: { NO_COLOR: "1" },
      }).output();
      const output = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
      assertEquals(out.success, false, output);
      assert(/NotCapable|Requires (net|run) access/.test(output), output);
    }
  });
});
