/**
 * Where the daemon's CPU goes at rest: `main.ts run` with the unit's V8 flags and glibc settings
 * against a simulated node with N parents, set up as bench/daemon_bench.ts says (5 s poll, the
 * admin endpoint on), then a window at rest: its CPU per minute by thread (/proc/<pid>/task), its RSS, and its passes by trigger (the
 * admin endpoint's metrics). With `--profile FILE`, a V8 CPU profile of that window (sampled every
 * 0.2 ms, which itself costs several seconds of CPU a minute: read the CPU figures from a run
 * without it):
 *
 *   deno run --allow-all bench/daemon_profile.ts [--parents 100] [--rest-seconds 30]
 *                                                [--settle-seconds 5] [--profile FILE]
 *                                                [--still-clock]
 *   deno run --allow-read bench/cpu_profile_summary.ts FILE
 */
import { parseArgs } from "node:util";
import { AGENT_MALLOC_ENV, agentDenoFlags } from "../scripts/permissions.ts";
import { jsonFiles, memoryOf, POLLS_PER_MINUTE, startBenchNode } from "./daemon_bench.ts";

const { values: flags } = parseArgs({
  args: Deno.args,
  options: {
    parents: { type: "string", default: "100" },
    "rest-seconds": { type: "string", default: "30" },
    "settle-seconds": { type: "string", default: "5" },
    profile: { type: "string" },
    /** The node's clock stands still (no relist, no reads of the static-pod dir each second). */
    "still-clock": { type: "boolean", default: false },
  },
});
const n = Number(flags.parents);
const TICKS_PER_SECOND = 100;
const ADMIN_PORT = 20_000 + Math.floor(Math.random() * 20_000);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** CPU seconds so far of each thread of `pid`, by thread name. */
function threadCpu(pid: number): Map<string, number> {
  const byName = new Map<string, number>();
  for (const task of Deno.readDirSync(`/proc/${pid}/task`)) {
    try {
      const stat = Deno.readTextFileSync(`/proc/${pid}/task/${task.name}/stat`);
      const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const seconds = (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
      byName.set(name, (byName.get(name) ?? 0) + seconds);
    } catch {
      // The thread ended meanwhile.
    }
  }
  return byName;
}

async function passesByTrigger(): Promise<string> {
  const text = await (await fetch(`http://127.0.0.1:${ADMIN_PORT}/metrics`)).text();
  return text.split("\n")
    .filter((line) => line.startsWith("ckpt_agent_passes_by_trigger_total{"))
    .map((line) => line.replace(/^.*trigger="([^"]+)"\} /, "$1 ")).join(", ");
}

const { node, stop } = await startBenchNode(n, { clockRuns: !flags["still-clock"] });
try {
  const settings = { pollIntervalMs: 5_000, adminListen: `127.0.0.1:${ADMIN_PORT}` };
  const configFile = await node.writeConfigFile(settings);
  const main = new URL("../main.ts", import.meta.url).pathname;
  const preload = new URL("./profiler_preload.ts", import.meta.url).pathname;
  // Profiled with every permission (the profile is written by the daemon's process); the
  // unit's V8 flags kept.
  const denoFlags = flags.profile
    ? ["--allow-all", agentDenoFlags().at(-1)!, "--preload", preload]
    : agentDenoFlags();
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", ...denoFlags, main, "run", "--config", configFile],
    env: {
      ...AGENT_MALLOC_ENV,
      ...(flags.profile ? { CKPT_BENCH_CPU_PROFILE: flags.profile } : {}),
    },
    stdout: "null",
    stderr: "null",
  }).spawn();
  try {
    while (jsonFiles(node.config().inactiveDir) < n) await sleep(50);
    await sleep(Number(flags["settle-seconds"]) * 1000);
    const passesBefore = await passesByTrigger();
    if (flags.profile) Deno.kill(child.pid, "SIGUSR2");
    const before = threadCpu(child.pid), startedAt = performance.now();
    await sleep(Number(flags["rest-seconds"]) * 1000);
    const after = threadCpu(child.pid), minutes = (performance.now() - startedAt) / 60_000;
    if (flags.profile) Deno.kill(child.pid, "SIGUSR2");
    const used = [...after].map(([name, s]) => [name, s - (before.get(name) ?? 0)] as const)
      .filter(([, s]) => s > 0);
    const total = used.reduce((sum, [, s]) => sum + s, 0);
    const memory = memoryOf(child.pid)!;
    const mib = (kb: number) => (kb / 1024).toFixed(1);
    console.log(`${n} parents, ${(minutes * 60).toFixed(0)} s at rest`);
    console.log(
      `  CPU per minute: ${(total / minutes).toFixed(3)} s (${
        (total / minutes / POLLS_PER_MINUTE * 1000).toFixed(1)
      } ms per poll); by thread: ${
        used.map(([name, s]) => `${name} ${(s / minutes).toFixed(3)} s`).join(", ")
      }`,
    );
    console.log(
      `  RSS ${mib(memory.rss)} MiB (anon ${mib(memory.anon)}, file ${mib(memory.file)})`,
    );
    console.log(`  passes by trigger, before the window: ${passesBefore}`);
    console.log(`  passes by trigger, after it:          ${await passesByTrigger()}`);
    if (flags.profile) await sleep(2_000); // the profile is written
  } finally {
    child.kill("SIGTERM");
    await child.status;
  }
} finally {
  await stop();
}
