/**
 * Summarizes a V8 heap snapshot (from bench/memory_probe.ts --heap-snapshot): self size by
 * constructor or node type, the largest nodes, and what retains each large ArrayBuffer's data.
 *
 *   deno run -A bench/heap_summary.ts FILE.heapsnapshot [--top 25] [--retained Name,Name]
 */
import { parseArgs } from "node:util";

const { values: flags, positionals } = parseArgs({
  args: Deno.args,
  options: {
    top: { type: "string", default: "25" },
    /** Also the size that objects of these constructor names (comma-separated) keep alive. */
    retained: { type: "string", default: "" },
  },
  allowPositionals: true,
});
const TOP = Number(flags.top);

interface Snapshot {
  snapshot: {
    meta: {
      node_fields: string[];
      node_types: [string[]];
      edge_fields: string[];
      edge_types: [string[]];
    };
  };
  nodes: number[];
  edges: number[];
  strings: string[];
}

const snap = JSON.parse(await Deno.readTextFile(positionals[0])) as Snapshot;
const meta = snap.snapshot.meta;
const NF = meta.node_fields.length, EF = meta.edge_fields.length;
const nType = meta.node_fields.indexOf("type"), nName = meta.node_fields.indexOf("name");
const nSize = meta.node_fields.indexOf("self_size"),
  nEdges = meta.node_fields.indexOf("edge_count");
const eType = meta.edge_fields.indexOf("type"), eName = meta.edge_fields.indexOf("name_or_index");
const eTo = meta.edge_fields.indexOf("to_node");
const nodeTypes = meta.node_types[0], edgeTypes = meta.edge_types[0];
const nodeCount = snap.nodes.length / NF;

const typeOf = (i: number) => nodeTypes[snap.nodes[i * NF + nType]];
const nameOf = (i: number) => snap.strings[snap.nodes[i * NF + nName]];
const sizeOf = (i: number) => snap.nodes[i * NF + nSize];

// First edge index of every node, and one retainer per node (for paths).
const firstEdge = new Uint32Array(nodeCount + 1);
for (let i = 0, e = 0; i < nodeCount; i++) {
  firstEdge[i] = e;
  e += snap.nodes[i * NF + nEdges] * EF;
  firstEdge[i + 1] = e;
}
const retainer = new Int32Array(nodeCount).fill(-1);
const retainerEdge = new Int32Array(nodeCount).fill(-1);
for (let i = 0; i < nodeCount; i++) {
  for (let e = firstEdge[i]; e < firstEdge[i + 1]; e += EF) {
    const to = snap.edges[e + eTo] / NF;
    const type = edgeTypes[snap.edges[e + eType]];
    if (type === "weak") continue;
    if (retainer[to] === -1) {
      retainer[to] = i;
      retainerEdge[to] = e;
    }
  }
}

const mb = (bytes: number) => `${(bytes / 1048576).toFixed(2)} MB`;
const byKind = new Map<string, { size: number; count: number }>();
let total = 0;
for (let i = 0; i < nodeCount; i++) {
  const type = typeOf(i);
  const key = type === "object" || type === "native" ? `${type}:${nameOf(i).slice(0, 60)}` : type;
  const entry = byKind.get(key) ?? { size: 0, count: 0 };
  entry.size += sizeOf(i);
  entry.count++;
  byKind.set(key, entry);
  total += sizeOf(i);
}
console.log(`total self size ${mb(total)} in ${nodeCount} nodes`);
for (
  const [key, { size, count }] of [...byKind].sort((a, b) => b[1].size - a[1].size).slice(0, TOP)
) {
  console.log(`${mb(size).padStart(10)} ${String(count).padStart(8)}  ${key}`);
}

function path(i: number, depth = 8): string {
  const steps: string[] = [];
  let at = i;
  for (let d = 0; d < depth && retainer[at] !== -1; d++) {
    const e = retainerEdge[at];
    const type = edgeTypes[snap.edges[e + eType]];
    const nameOrIndex = snap.edges[e + eName];
    const edge = type === "element" || type === "hidden"
      ? `[${nameOrIndex}]`
      : snap.strings[nameOrIndex];
    at = retainer[at];
    steps.push(`${nameOf(at).slice(0, 40)}.${edge}`);
  }
  return steps.join(" <- ");
}

console.log(`\nlargest nodes:`);
const largest = [...Array(nodeCount).keys()].sort((a, b) => sizeOf(b) - sizeOf(a)).slice(0, TOP);
for (const i of largest) {
  console.log(
    `${mb(sizeOf(i)).padStart(10)}  ${typeOf(i)}:${nameOf(i).slice(0, 50)}  <- ${path(i)}`,
  );
}

/** What only `owner` keeps alive: reachable from it, and not from the roots without it. */
function retainedBy(owners: Set<number>): { size: number; count: number } {
  const fromRoots = new Uint8Array(nodeCount);
  const stack = [0]; // the synthetic root
  fromRoots[0] = 1;
  while (stack.length > 0) {
    const i = stack.pop()!;
    for (let e = firstEdge[i]; e < firstEdge[i + 1]; e += EF) {
      if (edgeTypes[snap.edges[e + eType]] === "weak") continue;
      const to = snap.edges[e + eTo] / NF;
      if (fromRoots[to] || owners.has(to)) continue;
      fromRoots[to] = 1;
      stack.push(to);
    }
  }
  let size = 0, count = 0;
  const seen = new Uint8Array(nodeCount);
  const todo = [...owners];
  for (const o of owners) seen[o] = 1;
  while (todo.length > 0) {
    const i = todo.pop()!;
    size += sizeOf(i);
    count++;
    for (let e = firstEdge[i]; e < firstEdge[i + 1]; e += EF) {
      if (edgeTypes[snap.edges[e + eType]] === "weak") continue;
      const to = snap.edges[e + eTo] / NF;
      if (seen[to] || fromRoots[to]) continue;
      seen[to] = 1;
      todo.push(to);
    }
  }
  return { size, count };
}

for (const name of flags.retained.split(",").filter((n) => n !== "")) {
  const owners = new Set<number>();
  for (let i = 0; i < nodeCount; i++) {
    if (nameOf(i) === name && typeOf(i) === "object") owners.add(i);
  }
  const { size, count } = retainedBy(owners);
  console.log(`\nretained by ${owners.size} ${name}: ${mb(size)} in ${count} nodes`);
}
