/**
 * The functions that took the most time in a V8 CPU profile (.cpuprofile JSON), by self time
 * and by total time (self plus callees):
 *   deno run --allow-read bench/cpu_profile_summary.ts FILE [--top N]
 */
import { parseArgs } from "node:util";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const { values, positionals } = parseArgs({
  args: Deno.args,
  options: { top: { type: "string", default: "30" } },
  allowPositionals: true,
});
const profile: Profile = JSON.parse(await Deno.readTextFile(positionals[0]));
const top = Number(values.top);

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

function label(n: ProfileNode): string {
  const { functionName, url, lineNumber } = n.callFrame;
  const file = url.replace(/^.*\/(lib|bench|node_modules|ext)\//, "$1/");
  return `${functionName || "(anonymous)"} ${file}:${lineNumber + 1}`;
}

const self = new Map<string, number>(), total = new Map<string, number>();
let all = 0;
profile.samples.forEach((id, i) => {
  const dt = (profile.timeDeltas[i] ?? 0) / 1000;
  all += dt;
  const first = byId.get(id)!;
  self.set(label(first), (self.get(label(first)) ?? 0) + dt);
  // Total time counts a function once per sample, however deep it recurses.
  const seen = new Set<string>();
  for (let n: number | undefined = id; n !== undefined; n = parent.get(n)) {
    const name = label(byId.get(n)!);
    if (seen.has(name)) continue;
    seen.add(name);
    total.set(name, (total.get(name) ?? 0) + dt);
  }
});

function print(title: string, table: Map<string, number>) {
  console.log(`\n${title} (of ${all.toFixed(0)} ms sampled)`);
  for (const [name, t] of [...table].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(
      `${t.toFixed(1).padStart(9)} ms ${(100 * t / all).toFixed(1).padStart(5)}%  ${name}`,
    );
  }
}
print("self time", self);
print("total time", total);
