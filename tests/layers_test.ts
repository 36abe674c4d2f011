/**
 * The layers of the code, from the bottom up, and the test that every import looks down them:
 * a module imports its own layer and lower ranks, never a sibling of its rank or anything above,
 * and no module imports itself through others.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { dirname, join, relative } from "node:path";
import {
  checkLayers,
  cycles,
  type ImportGraph,
  importGraph,
  type LayerOrder,
  tsFiles,
  unplaced,
} from "./helpers/import_graph.ts";
import { withTempDir } from "./helpers/temp_dir.ts";

const REPO = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

const LAYERS: LayerOrder = [
  // Pure: the state machine, the planner, the sanitizer, the checkpoint trees' layout.
  [{ name: "core", paths: ["lib/core/"] }],
  // Generic helpers, and what the build knows about itself.
  [
    { name: "util", paths: ["lib/util/"] },
    {
      name: "build",
      paths: ["lib/build_info.ts", "lib/git_commit.ts", "lib/version_info.ts", "deno.json"],
    },
  ],
  // The settings, which the edges below the pass read.
  [{ name: "config", paths: ["lib/config/"] }],
  // Files: atomic writes, the checkpoint trees, the lock; the sources and stores build on them.
  [{ name: "disk", paths: ["lib/disk/"] }],
  // The node's peers, and the state dir.
  [{ name: "sources", paths: ["lib/sources/"] }, { name: "store", paths: ["lib/store/"] }],
  // One pass of the agent; verify, which reads what passes wrote; doctor, which checks the node
  // is set up for passes; the simulated node.
  [
    { name: "pass", paths: ["lib/pass/"] },
    { name: "verify", paths: ["lib/verify/"] },
    { name: "doctor", paths: ["lib/doctor/"] },
    { name: "sim", paths: ["lib/sim/"] },
  ],
  // The loop around the pass; the demo, a real agent on the simulated node.
  [{ name: "daemon", paths: ["lib/daemon/"] }, { name: "demo", paths: ["lib/demo/"] }],
  // The admin endpoint of the daemon.
  [{ name: "admin", paths: ["lib/admin/"] }],
  // Flags, exit codes and errors of the command line.
  [{ name: "cli", paths: ["lib/cli/"] }],
  // The commands; the benchmarks, the build scripts and the test helpers the benchmarks share,
  // which may use anything the commands use.
  [
    { name: "commands", paths: ["lib/commands/"] },
    { name: "tools", paths: ["bench/", "scripts/", "tests/"] },
  ],
  [{ name: "main", paths: ["main.ts"] }],
];

async function repoGraph(): Promise<ImportGraph> {
  const files = ["main.ts"];
  for (const dir of ["lib", "bench", "scripts"]) files.push(...await tsFiles(REPO, dir));
  return await importGraph(REPO, files, join(REPO, "deno.json"));
}

Deno.test("layers: every module of lib/, bench/, scripts/ and main.ts is in a layer", async () => {
  assertEquals(unplaced(await repoGraph(), LAYERS), []);
});

Deno.test("layers: every import looks down the layers, and no module imports itself", async () => {
  const graph = await repoGraph();
  assertEquals(checkLayers(graph, LAYERS), []);
  assertEquals(cycles(graph), []);
});

const FIXTURE_LAYERS: LayerOrder = [
  [{ name: "core", paths: ["lib/core/"] }],
  [{ name: "disk", paths: ["lib/disk/"] }, { name: "store", paths: ["lib/store/"] }],
  [{ name: "pass", paths: ["lib/pass/"] }],
];

/** A small tree whose modules import what `imports` says, in every form an import can take. */
async function fixtureGraph(root: string, imports: Record<string, string[]>) {
  const forms = [
    (s: string) => `import { x } from "${s}";`,
    (s: string) => `import type { X } from "${s}";`,
    (s: string) => `export * from "${s}";`,
    (s: string) => `await import("${s}");`,
  ];
  for (const [file, targets] of Object.entries(imports)) {
    await Deno.mkdir(join(root, dirname(file)), { recursive: true });
    const lines = targets.map((target, i) => {
      const spec = relative(dirname(file), target);
      return forms[i % forms.length](spec.startsWith(".") ? spec : `./${spec}`);
    });
    await Deno.writeTextFile(
      join(root, file),
      [...lines, "export const x = 1;", "export type X = number;"].join("\n"),
    );
  }
  return await importGraph(root, Object.keys(imports));
}

Deno.test("layers: a planted backwards import, a sibling's import and a cycle are caught", async () => {
  await withTempDir(async (root) => {
    const graph = await fixtureGraph(root, {
      "lib/core/a.ts": [],
      "lib/disk/d.ts": ["lib/core/a.ts"],
      "lib/store/s.ts": ["lib/disk/d.ts"],
      "lib/pass/p.ts": ["lib/disk/d.ts", "lib/core/a.ts", "lib/pass/q.ts"],
      "lib/pass/q.ts": ["lib/pass/r.ts"],
      "lib/pass/r.ts": ["lib/pass/p.ts"],
      // The planted one: the core reaches up into the pass, dynamically.
      "lib/core/b.ts": ["lib/core/a.ts", "lib/core/a.ts", "lib/core/a.ts", "lib/pass/p.ts"],
    });
    assertEquals(graph.get("lib/core/b.ts"), ["lib/core/a.ts", "lib/pass/p.ts"]);
    assertEquals(checkLayers(graph, FIXTURE_LAYERS), [
      "lib/core/b.ts -> lib/pass/p.ts (core is below pass)",
      "lib/store/s.ts -> lib/disk/d.ts (store and disk are siblings)",
    ]);
    assertEquals(cycles(graph), [["lib/pass/p.ts", "lib/pass/q.ts", "lib/pass/r.ts"]]);
    assertEquals(unplaced(graph, FIXTURE_LAYERS), []);
    assertEquals(unplaced(graph, FIXTURE_LAYERS.slice(0, 2)), [
      "lib/pass/p.ts",
      "lib/pass/q.ts",
      "lib/pass/r.ts",
    ]);
  });
});
