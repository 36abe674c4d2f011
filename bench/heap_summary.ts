/**
 * Summarizes a V8 heap snapshot (from bench/memory_probe.ts --heap-snapshot): self size by
 * constructor or node type, the largest nodes, and what retains each large ArrayBuffer's data.
 *
 *   deno run -A bench/heap_summary.ts FILE.heapsnapshot [--top 25] [--retained Name,Name]
 *                                     [--dominators]
 *
 * `--dominators`: the objects that keep the most alive (their retained size: what would be freed
 * with them, from V8's dominator tree, as DevTools computes it), with a path from the roots.
 */
import { parseArgs } from "node:util";

const { values: flags, positionals } = parseArgs({
  args: Deno.args,
  options: {
    top: { type: "string", default: "25" },
    /** Also the size that objects of these constructor names (comma-separated) keep alive. */
    retained: { type: "string", default: "" },
    dominators: { type: "boolean", default: false },
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

/**
 * Each node's immediate dominator (Cooper, Harvey and Kennedy's iterative algorithm over a
 * reverse postorder from the synthetic root, node 0), then retained sizes.
 */
function retainedSizes(): { retained: Float64Array; idom: Int32Array } {
  const order = new Int32Array(nodeCount).fill(-1); // postorder number
  const post: number[] = [];
  const visited = new Uint8Array(nodeCount);
  const stack: number[] = [0], edgeAt: number[] = [firstEdge[0]];
  visited[0] = 1;
  while (stack.length > 0) {
    const i = stack[stack.length - 1];
    const e = edgeAt[edgeAt.length - 1];
    if (e >= firstEdge[i + 1]) {
      stack.pop();
      edgeAt.pop();
      order[i] = post.length;
      post.push(i);
      continue;
    }
    edgeAt[edgeAt.length - 1] = e + EF;
    if (edgeTypes[snap.edges[e + eType]] === "weak") continue;
    const to = snap.edges[e + eTo] / NF;
    if (visited[to]) continue;
    visited[to] = 1;
    stack.push(to);
    edgeAt.push(firstEdge[to]);
  }
  // Predecessors of each reachable node.
  const predCount = new Uint32Array(nodeCount + 1);
  for (let i = 0; i < nodeCount; i++) {
    if (!visited[i]) continue;
    for (let e = firstEdge[i]; e < firstEdge[i + 1]; e += EF) {
      if (edgeTypes[snap.edges[e + eType]] === "weak") continue;
      predCount[snap.edges[e + eTo] / NF + 1]++;
    }
  }
  for (let i = 0; i < nodeCount; i++) predCount[i + 1] += predCount[i];
  const preds = new Int32Array(predCount[nodeCount]);
  const fill = predCount.slice(0, nodeCount);
  for (let i = 0; i < nodeCount; i++) {
    if (!visited[i]) continue;
    for (let e = firstEdge[i]; e < firstEdge[i + 1]; e += EF) {
      if (edgeTypes[snap.edges[e + eType]] === "weak") continue;
      preds[fill[snap.edges[e + eTo] / NF]++] = i;
    }
  }
  const idom = new Int32Array(nodeCount).fill(-1);
  idom[0] = 0;
  const intersect = (a: number, b: number) => {
    while (a !== b) {
      while (order[a] < order[b]) a = idom[a];
      while (order[b] < order[a]) b = idom[b];
    }
    return a;
  };
  for (let changed = true; changed;) {
    changed = false;
    for (let k = post.length - 2; k >= 0; k--) {
      const i = post[k];
      let dom = -1;
      for (let p = predCount[i]; p < predCount[i + 1]; p++) {
        const pred = preds[p];
        if (idom[pred] === -1) continue;
        dom = dom === -1 ? pred : intersect(pred, dom);
      }
      if (dom !== idom[i]) {
        idom[i] = dom;
        changed = true;
      }
    }
  }
  const retained = new Float64Array(nodeCount);
  for (const i of post) retained[i] += sizeOf(i);
  for (const i of post) if (i !== 0 && idom[i] >= 0) retained[idom[i]] += retained[i];
  return { retained, idom };
}

if (flags.dominators) {
  const { retained, idom } = retainedSizes();
  console.log(`\nkeeping the most alive (retained size, immediate dominator chain):`);
  const top = [...Array(nodeCount).keys()]
    .filter((i) => typeOf(i) === "object" || typeOf(i) === "closure")
    .sort((a, b) => retained[b] - retained[a]).slice(0, TOP);
  for (const i of top) {
    const chain: string[] = [];
    for (let at = idom[i], d = 0; at > 0 && d < 6; at = idom[at], d++) {
      chain.push(nameOf(at).slice(0, 30));
    }
    console.log(
      `${mb(retained[i]).padStart(10)}  ${typeOf(i)}:${nameOf(i).slice(0, 40)}  <- ${
        chain.join(" <- ")
      }  | ${path(i, 5)}`,
    );
  }
  const byClass = new Map<string, number>();
  for (let i = 0; i < nodeCount; i++) {
    // Counted where the dominator is of another class: a class's own tree counted once.
    const name = `${typeOf(i)}:${nameOf(i).slice(0, 40)}`;
    const dom = idom[i];
    if (typeOf(i) !== "object" || dom < 0) continue;
    if (`${typeOf(dom)}:${nameOf(dom).slice(0, 40)}` === name) continue;
    byClass.set(name, (byClass.get(name) ?? 0) + retained[i]);
  }
  console.log(`\nretained, by class (outermost of each class):`);
  for (const [name, size] of [...byClass].sort((a, b) => b[1] - a[1]).slice(0, TOP)) {
    console.log(`${mb(size).padStart(10)}  ${name}`);
  }
}
