/**
 * `ckpt-agent version` and `ckpt-agent help` load neither the admin server nor the agent, and the
 * daemon (`run`) loads none of the packages and modules it has no use for: read from the module
 * graph Deno resolves (scripts/module_graph.ts), following the imports that run (no `import
 * type`) from main.ts and from the module main.ts imports for the command.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { type GraphDependency, moduleGraph } from "../../scripts/module_graph.ts";

const ROOT = new URL("../../", import.meta.url);
const CONFIG = new URL("deno.json", ROOT).pathname;

/** The module graph from `path`: each module's imports. */
async function importsFrom(path: string): Promise<Map<string, GraphDependency[]>> {
  const modules = await moduleGraph([new URL(path, ROOT).pathname], CONFIG);
  return new Map([...modules].map(([specifier, m]) => [specifier, m.dependencies ?? []]));
}

/** What loading `path` loads: its static imports, transitively (npm packages by specifier). */
async function staticClosure(path: string): Promise<Set<string>> {
  const graph = await importsFrom(path);
  const root = new URL(path, ROOT).href;
  const seen = new Set([root]);
  const queue = [root];
  while (queue.length > 0) {
    for (const dep of graph.get(queue.pop()!) ?? []) {
      const target = dep.code?.specifier;
      if (target === undefined || dep.isDynamic || seen.has(target)) continue;
      seen.add(target);
      queue.push(target);
    }
  }
  return seen;
}

/** The admin server, the agent's daemon command, and the package only they need. */
function heavy(specifier: string): boolean {
  return specifier.startsWith(new URL("lib/admin/", ROOT).href) ||
    specifier === new URL("lib/commands/run.ts", ROOT).href ||
    /^npm:\/?hono@/.test(specifier);
}

/**
 * What the daemon must not load: the packages only tests and other commands use (each costs the
 * daemon megabytes of memory for as long as it runs: docs/benchmarks.md), and the simulated
 * cluster, the demo and the verifier.
 */
function notForTheDaemon(specifier: string): boolean {
  return /^npm:\/?(protobufjs|prom-client|@peculiar\/x509|reflect-metadata)@/.test(specifier) ||
    ["lib/sim/", "lib/demo/", "lib/verify/", "lib/doctor/"]
      .some((dir) => specifier.startsWith(new URL(dir, ROOT).href));
}

async function loadedFor(commandModule: string): Promise<string[]> {
  const main = await importsFrom("main.ts");
  const dynamic = main.get(new URL("main.ts", ROOT).href)!
    .filter((dep) => dep.isDynamic).map((dep) => dep.code?.specifier);
  // The test follows the module main.ts really loads for the command.
  assert(dynamic.includes(new URL(commandModule, ROOT).href), `main.ts loads ${commandModule}`);
  return [...await staticClosure("main.ts"), ...await staticClosure(commandModule)];
}

Deno.test("the graph walk sees the heavy modules where they are: the run command loads them", async () => {
  const run = await loadedFor("lib/commands/run.ts");
  assert(run.some((m) => m.startsWith(new URL("lib/admin/", ROOT).href)), "lib/admin/");
  assert(run.some((m) => /^npm:\/?hono@/.test(m)), "hono");
});

Deno.test("the daemon loads neither protobufjs, prom-client, x509, the simulation, the demo, the verifier nor the doctor", async () => {
  const demo = await loadedFor("lib/commands/demo.ts");
  assert(demo.some(notForTheDaemon), "the walk sees them where they are loaded");
  assertEquals((await loadedFor("lib/commands/run.ts")).filter(notForTheDaemon), []);
});

Deno.test("version loads neither the admin server, Hono nor the run command", async () => {
  assertEquals((await loadedFor("lib/commands/version.ts")).filter(heavy), []);
});

Deno.test("help loads neither the admin server, Hono nor the run command", async () => {
  assertEquals((await loadedFor("lib/cli/help.ts")).filter(heavy), []);
});
