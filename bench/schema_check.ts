/**
 * The CPU of checking the node's pod list, as the daemon does on every pass (the kubelet's
 * /pods and the API server's list): `--pods` copies of tests/fixtures/kube-apiserver-pod.json
 * (about 5.5 KB each, status included), or with `--sim` the pods of `manyParents`
 * (lib/sim/control_plane.ts, no status), parsed from JSON and checked with PodListSchema `--runs`
 * times; the process's CPU time (user + system) and wall time, and the same for JSON.parse alone.
 *
 *   deno run -A [--v8-flags=...] bench/schema_check.ts [--pods 1000] [--runs 40] [--sim]
 */
import { parseArgs } from "node:util";
import process from "node:process";
import { check } from "../lib/core/schema.ts";
import { manyParents } from "../lib/sim/control_plane.ts";
import { PodListSchema } from "../lib/sources/apiserver.ts";

const { values: flags } = parseArgs({
  args: Deno.args,
  options: {
    pods: { type: "string", default: "1000" },
    runs: { type: "string", default: "40" },
    sim: { type: "boolean", default: false },
  },
});
const count = Number(flags.pods);
const fixture = JSON.parse(
  await Deno.readTextFile(new URL("../tests/fixtures/kube-apiserver-pod.json", import.meta.url)),
);
const pods = flags.sim
  ? manyParents("node-1", count).pods
  : Array.from({ length: count }, (_, i) => ({
    ...fixture,
    metadata: { ...fixture.metadata, name: `pod-${i}`, uid: `uid-${i}` },
  }));
const text = JSON.stringify({ kind: "PodList", apiVersion: "v1", metadata: {}, items: pods });
const runs = Number(flags.runs);

/** CPU seconds (user + system) and wall seconds of `runs` calls of `fn`. */
function measure(fn: () => void): [number, number] {
  const cpu = process.cpuUsage();
  const start = performance.now();
  for (let run = 0; run < runs; run++) fn();
  const used = process.cpuUsage(cpu);
  return [(used.user + used.system) / 1e6, (performance.now() - start) / 1000];
}

// As a pass does: a list fresh from JSON.parse each time, then checked.
const [parseCpu, parseWall] = measure(() => JSON.parse(text));
const [cpu, wall] = measure(() => {
  if (!check(PodListSchema, JSON.parse(text)).success) throw new Error("the list did not pass");
});
const s = (x: number) => `${x.toFixed(2)} s`;
console.log(
  `${count} pods (${(text.length / 1024 / 1024).toFixed(1)} MiB of JSON), ${runs} times: ` +
    `JSON.parse and check CPU ${s(cpu)} (wall ${s(wall)}), JSON.parse alone CPU ${
      s(parseCpu)
    } (wall ${s(parseWall)})`,
);
