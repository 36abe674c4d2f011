/**
 * What a watch costs the agent's process: N watches of single secrets (as the object watches
 * are) opened against the simulated API server (in this process), by a client in a process of
 * its own (bench/watch_memory_client.ts) with the daemon's V8 flags and allocator settings; its
 * anonymous RSS with one watch open, then with all N open and settled.
 *
 *   deno run -A bench/watch_memory.ts [--watches 1000] [--transport h2|fetch] [--settle-seconds 10]
 *
 * `h2`: our own HTTP/2 connections (lib/sources/h2/); `fetch`: fetch's, with Deno.HttpClient.
 */
import { parseArgs } from "node:util";
import { startSimApiServer } from "../lib/sim/apiserver.ts";
import { createSimCa } from "../lib/sim/pki.ts";
import { AGENT_MALLOC_ENV, AGENT_V8_FLAGS } from "../scripts/permissions.ts";
import type { WatchMemoryJob, WatchMemoryReport } from "./watch_memory_client.ts";

const { values: flags } = parseArgs({
  args: Deno.args,
  options: {
    watches: { type: "string", default: "1000" },
    transport: { type: "string", default: "h2" },
    "settle-seconds": { type: "string", default: "10" },
  },
});
const watches = Number(flags.watches);
const transport = flags.transport;
if (transport !== "h2" && transport !== "fetch") throw new Error(`--transport h2|fetch`);

const ca = await createSimCa();
const client = await ca.issueClientCert({
  commonName: "system:node:node-1",
  organizations: ["system:nodes"],
});
const server = await startSimApiServer(ca);
for (let i = 0; i < watches; i++) server.setSecret("kube-system", `secret-${i}`, { key: `v-${i}` });
const job: WatchMemoryJob = {
  baseUrl: server.url,
  caPem: ca.certPem,
  certPem: client.certPem,
  keyPem: client.keyPem,
  watches,
  transport,
  settleMs: Number(flags["settle-seconds"]) * 1000,
};
const child = new Deno.Command(Deno.execPath(), {
  args: [
    "run",
    "--allow-all",
    `--v8-flags=${AGENT_V8_FLAGS.map((f) => f.flag).join(",")},--expose-gc`,
    new URL("./watch_memory_client.ts", import.meta.url).pathname,
  ],
  env: { ...AGENT_MALLOC_ENV, NO_PROXY: "*" },
  stdin: "piped",
  stdout: "piped",
}).spawn();
const writer = child.stdin.getWriter();
await writer.write(new TextEncoder().encode(JSON.stringify(job)));
await writer.close();
const output = await child.output();
await server.close();
const report: WatchMemoryReport = JSON.parse(new TextDecoder().decode(output.stdout));
const mib = (kb: number) => (kb / 1024).toFixed(1);
console.log(
  `${transport}: ${watches} watches over ${report.connections} connection(s); RssAnon ` +
    `${mib(report.oneKb)} MiB with one, ${mib(report.allKb)} MiB with all: ` +
    `${((report.allKb - report.oneKb) / (watches - 1)).toFixed(1)} KB a watch, of which V8's ` +
    `heap ${((report.heapAllKb - report.heapOneKb) / (watches - 1)).toFixed(1)} KB; ` +
    `opened in ${report.openMs} ms; load ${Deno.loadavg().join(" ")}`,
);
