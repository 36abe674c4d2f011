/**
 * A fixed piece of JavaScript work (JSON and a hash, as a pass does) whose CPU time says how much
 * the machine's load inflates CPU time: on a shared machine the same work costs more CPU while
 * other processes thrash the caches and share the cores. Run as a process of its own with the
 * daemon's flags (`calibrationMs`); prints its CPU milliseconds.
 */
import { cpuUsage } from "node:process";
import { createHash } from "node:crypto";
import { AGENT_MALLOC_ENV, agentDenoFlags } from "../scripts/permissions.ts";

function work(): number {
  const start = cpuUsage();
  const items = Array.from({ length: 20_000 }, (_, i) => ({
    name: `pod-${i}`,
    labels: { app: `a${i % 97}`, tier: "control-plane" },
    list: [i, i + 1, i + 2],
  }));
  for (let round = 0; round < 10; round++) {
    const text = JSON.stringify(items);
    createHash("sha256").update(text).digest("hex");
    JSON.parse(text);
  }
  const used = cpuUsage(start);
  return (used.user + used.system) / 1000;
}

/** CPU milliseconds of the work in a fresh process, the median of three. */
export async function calibrationMs(): Promise<number> {
  const runs: number[] = [];
  for (let i = 0; i < 3; i++) {
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["run", ...agentDenoFlags(), new URL(import.meta.url).pathname],
      env: AGENT_MALLOC_ENV,
    }).output();
    runs.push(Number(new TextDecoder().decode(output.stdout)));
  }
  return runs.sort((a, b) => a - b)[1];
}

if (import.meta.main) console.log(work().toFixed(1));
