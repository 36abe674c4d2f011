/**
 * The hand-back gap in the simulated reboot drill (tests/helpers/drill.ts): how long neither a
 * parent nor its copy ran after the API server came back, for every phase of the agent's passes
 * against the return, with the kubelet's own numbers (services read 2 s after the return, a
 * failed sync tried again 10 s later, restart back-off 10 s doubling). All on the simulated
 * clock: the figures are the model's, not the machine's.
 * Run: deno run --allow-all bench/handback_bench.ts [--json FILE]
 */
import { parseArgs } from "node:util";
import { runDrill } from "../tests/helpers/drill.ts";

const { values: flags } = parseArgs({ options: { json: { type: "string" } } });

const RULES = [
  { rule: "a container exists (this agent)", sandboxCounts: false },
  { rule: "a ready sandbox (before)", sandboxCounts: true },
] as const;

interface Row {
  rule: string;
  pollS: number;
  offsetS: number;
  /** Seconds with neither running, per parent; null: it never ended. */
  neitherS: Record<string, number | null>;
}

const rows: Row[] = [];
for (const { rule, sandboxCounts } of RULES) {
  for (const pollS of [5, 1]) {
    for (let offsetS = 0; offsetS < pollS; offsetS++) {
      const result = await runDrill({ offsetS, pollS, sandboxCounts });
      rows.push({
        rule,
        pollS,
        offsetS,
        neitherS: Object.fromEntries(
          result.parents.map((p) => [
            p.id.split("/")[1],
            Number.isFinite(p.neitherS) ? p.neitherS : null,
          ]),
        ),
      });
    }
  }
}

const names = Object.keys(rows[0].neitherS);
console.log(`| running when | poll | return after a pass | ${names.join(" | ")} |`);
console.log(`| --- | --- | --- | ${names.map(() => "---").join(" | ")} |`);
for (const row of rows) {
  const cells = names.map((n) => row.neitherS[n] === null ? "never ends" : `${row.neitherS[n]} s`);
  console.log(`| ${row.rule} | ${row.pollS} s | ${row.offsetS} s | ${cells.join(" | ")} |`);
}
if (flags.json) await Deno.writeTextFile(flags.json, JSON.stringify(rows, null, 2) + "\n");
