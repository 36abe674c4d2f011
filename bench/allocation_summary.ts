/**
 * Where a sampling heap profile (bench/memory_probe.ts --allocations) says the bytes were
 * allocated: by function (self), and by function including what it called (total).
 *
 *   deno run -A bench/allocation_summary.ts FILE [--top 30]
 */
import { parseArgs } from "node:util";

interface SamplingNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: SamplingNode[];
}

const { values, positionals } = parseArgs({
  args: Deno.args,
  options: { top: { type: "string", default: "30" } },
  allowPositionals: true,
});
const { head } = JSON.parse(await Deno.readTextFile(positionals[0])) as { head: SamplingNode };
const top = Number(values.top);

const self = new Map<string, number>();
const total = new Map<string, number>();
let all = 0;

function label(node: SamplingNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const file = url.replace(/^.*\/(lib|bench|node_modules|npm|ext)\//, "$1/").slice(-60);
  return `${functionName || "(anonymous)"} ${file}:${lineNumber + 1}`;
}

/** Returns the bytes under `node`; counts each function once per stack in `total`. */
function walk(node: SamplingNode, onStack: Set<string>): number {
  const name = label(node);
  self.set(name, (self.get(name) ?? 0) + node.selfSize);
  all += node.selfSize;
  const first = !onStack.has(name);
  if (first) onStack.add(name);
  let bytes = node.selfSize;
  for (const child of node.children) bytes += walk(child, onStack);
  if (first) {
    onStack.delete(name);
    total.set(name, (total.get(name) ?? 0) + bytes);
  }
  return bytes;
}
walk(head, new Set());

const mb = (bytes: number) => `${(bytes / 1048576).toFixed(1).padStart(8)} MB`;
const show = (title: string, table: Map<string, number>) => {
  console.log(`\n${title}`);
  for (const [name, bytes] of [...table].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(`${mb(bytes)} ${(100 * bytes / all).toFixed(1).padStart(5)} %  ${name}`);
  }
};
console.log(`sampled ${mb(all)} allocated`);
show("self", self);
show("total (self and callees)", total);
