/**
 * What a poll's questions cost the daemon's process: the kubelet's `/pods` and the runtime's
 * listing, asked through the daemon's own clients (`connectNode`) in a process of their own with
 * the unit's flags and glibc settings, against a node set up as bench/daemon_bench.ts says. CPU
 * (user + system, every thread, from getrusage) per call: the first (a new connection: for the
 * kubelet a TLS handshake with the node's client certificate), the next ones on the kept
 * connection, and the kubelet's asked with new clients every call (a handshake each time, as a
 * client that kept no connection would pay), `--calls` of each, 200 ms apart:
 *
 *   deno run --allow-all bench/source_cost.ts [--parents 10] [--calls 30]
 */
import { parseArgs } from "node:util";
import { cpuUsage } from "node:process";
import { loadConfig } from "../lib/config/load.ts";
import { connectNode } from "../lib/sources/node.ts";
import { AGENT_MALLOC_ENV, agentDenoFlags } from "../scripts/permissions.ts";
import { POLL_INTERVAL_MS, startBenchNode } from "./daemon_bench.ts";

const { values: flags } = parseArgs({
  args: Deno.args,
  options: {
    parents: { type: "string", default: "10" },
    calls: { type: "string", default: "30" },
    /** Set by the bench for the process that asks. */
    config: { type: "string" },
  },
});
const calls = Number(flags.calls);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Milliseconds of this process's CPU that `call` took. */
async function cpuOf(call: () => Promise<unknown>): Promise<number> {
  const before = cpuUsage();
  await call();
  const used = cpuUsage(before);
  return (used.user + used.system) / 1000;
}

function median(samples: number[]): number {
  return [...samples].sort((a, b) => a - b)[Math.floor(samples.length / 2)];
}

/** The process that asks: one JSON line of CPU milliseconds on stdout. */
async function ask(configFile: string) {
  const { config } = await loadConfig(["--config", configFile]);
  const sources = await connectNode(config);
  const kubelet = { first: 0, kept: [] as number[], newClients: [] as number[] };
  const runtime = { first: 0, kept: [] as number[] };
  const must = async <T>(answer: Promise<{ ok: boolean } & T>) => {
    if (!(await answer).ok) throw new Error("a source failed");
  };
  kubelet.first = await cpuOf(() => must(sources.kubelet.listPods()));
  runtime.first = await cpuOf(() => must(sources.runtime.listRunningPods()));
  for (let i = 0; i < calls; i++) {
    await sleep(200);
    kubelet.kept.push(await cpuOf(() => must(sources.kubelet.listPods())));
    runtime.kept.push(await cpuOf(() => must(sources.runtime.listRunningPods())));
  }
  for (let i = 0; i < calls; i++) {
    await sleep(200);
    let fresh: Awaited<ReturnType<typeof connectNode>> | undefined;
    kubelet.newClients.push(
      await cpuOf(async () => {
        fresh = await connectNode(config);
        await must(fresh.kubelet.listPods());
      }),
    );
    await fresh?.runtime.close();
  }
  await sources.runtime.close();
  console.log(JSON.stringify({
    kubelet: { first: kubelet.first, kept: median(kubelet.kept), new: median(kubelet.newClients) },
    runtime: { first: runtime.first, kept: median(runtime.kept) },
  }));
}

if (flags.config) {
  await ask(flags.config);
  Deno.exit(0); // the kept connections would hold the process for their idle time
}

const n = Number(flags.parents);
const { node, stop } = await startBenchNode(n);
try {
  const configFile = await node.writeConfigFile({ pollIntervalMs: POLL_INTERVAL_MS });
  const output = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-all",
      agentDenoFlags().at(-1)!, // the unit's V8 flags
      new URL(import.meta.url).pathname,
      "--config",
      configFile,
      "--calls",
      String(calls),
    ],
    env: AGENT_MALLOC_ENV,
    stderr: "inherit",
  }).output();
  if (!output.success) throw new Error("the asking process failed");
  const ms = JSON.parse(new TextDecoder().decode(output.stdout));
  const f = (x: number) => `${x.toFixed(2)} ms`;
  console.log(`${n} parents (+${Math.floor(n / 2)} other pods), CPU per call, median of ${calls}:`);
  console.log(
    `  kubelet /pods: first (TLS handshake) ${f(ms.kubelet.first)}, on the kept connection ${
      f(ms.kubelet.kept)
    }, with new clients each call ${f(ms.kubelet.new)}`,
  );
  console.log(
    `  runtime (ListPodSandbox + ListContainers): first ${f(ms.runtime.first)}, kept ${
      f(ms.runtime.kept)
    }`,
  );
} finally {
  await stop();
}
