/**
 * The import graph of a source tree as Deno itself resolves it (scripts/module_graph.ts: static,
 * dynamic and type-only imports alike), and the two checks tests/layers_test.ts makes of it:
 * every import looks down an order of layers, and no module reaches itself.
 */
import { join, relative } from "node:path";
import { moduleGraph } from "../../scripts/module_graph.ts";

/** Each module (relative to the tree's root) and the local modules it imports, sorted. */
export type ImportGraph = Map<string, string[]>;

/**
 * The graph of `files` (relative to `root`) and of every local file they import. `config`: the
 * deno.json that resolves bare specifiers; without it, none is read.
 */
export async function importGraph(
  root: string,
  files: readonly string[],
  config?: string,
): Promise<ImportGraph> {
  const modules = await moduleGraph(files.map((file) => join(root, file)), config);
  const local = (specifier: string) =>
    specifier.startsWith("file://") ? relative(root, new URL(specifier).pathname) : undefined;
  const graph: ImportGraph = new Map();
  for (const module of modules.values()) {
    const from = local(module.specifier);
    if (from === undefined) continue;
    if (module.error) throw new Error(`${from}: ${module.error}`);
    const to = new Set<string>();
    for (const dep of module.dependencies ?? []) {
      for (const target of [dep.code?.specifier, dep.type?.specifier]) {
        const file = target === undefined ? undefined : local(target);
        if (file !== undefined) to.add(file);
      }
    }
    graph.set(from, [...to].sort());
  }
  return graph;
}

/** Every `.ts` file under `dir` (relative to `root`), sorted. */
export async function tsFiles(root: string, dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const entry of Deno.readDir(join(root, dir))) {
    const path = join(dir, entry.name);
    if (entry.isDirectory) out.push(...await tsFiles(root, path));
    else if (entry.isFile && entry.name.endsWith(".ts")) out.push(path);
  }
  return out.sort();
}

/** A layer: its name, and the folders (ending in `/`) and files that make it up. */
export interface Layer {
  name: string;
  paths: readonly string[];
}

/**
 * Layers from the bottom up; the layers of one rank are siblings. A module may import modules of
 * its own layer and of lower ranks, never of a sibling or of a higher rank.
 */
export type LayerOrder = readonly (readonly Layer[])[];

function place(order: LayerOrder, file: string): { name: string; rank: number } | undefined {
  for (const [rank, layers] of order.entries()) {
    for (const layer of layers) {
      const inLayer = layer.paths.some((p) => p.endsWith("/") ? file.startsWith(p) : file === p);
      if (inLayer) return { name: layer.name, rank };
    }
  }
  return undefined;
}

/** The modules of the graph in no layer. */
export function unplaced(graph: ImportGraph, order: LayerOrder): string[] {
  return [...graph.keys()].filter((file) => place(order, file) === undefined).sort();
}

/** Checks every import of the graph against the order: `from -> to (why)` for each forbidden one. */
export function checkLayers(graph: ImportGraph, order: LayerOrder): string[] {
  const violations: string[] = [];
  for (const [from, imports] of graph) {
    const a = place(order, from);
    if (a === undefined) continue;
    for (const to of imports) {
      const b = place(order, to);
      let why: string | undefined;
      if (b === undefined) why = "it is in no layer";
      else if (b.name === a.name) continue;
      else if (b.rank > a.rank) why = `${a.name} is below ${b.name}`;
      else if (b.rank === a.rank) why = `${a.name} and ${b.name} are siblings`;
      if (why !== undefined) violations.push(`${from} -> ${to} (${why})`);
    }
  }
  return violations.sort();
}

/** Every set of modules that import each other, directly or not (Tarjan), each sorted. */
export function cycles(graph: ImportGraph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort());
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return found.sort((x, y) => x[0] < y[0] ? -1 : 1);
}
