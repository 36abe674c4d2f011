/** The client side of bench/watch_memory.ts: opens the watches, then says what they cost. */
import type { HttpTarget } from "../lib/sources/http.ts";
import { openWatch, watchClients } from "../lib/sources/watch_stream.ts";

export interface WatchMemoryJob {
  baseUrl: string;
  caPem: string;
  certPem: string;
  keyPem: string;
  watches: number;
  transport: "h2" | "fetch";
  settleMs: number;
}

export interface WatchMemoryReport {
  /** RssAnon (kB) with one watch open, and with all. */
  oneKb: number;
  allKb: number;
  /** V8's heap in use (kB), with one and with all. */
  heapOneKb: number;
  heapAllKb: number;
  connections: number;
  openMs: number;
}

const job: WatchMemoryJob = JSON.parse(await new Response(Deno.stdin.readable).text());
const target: HttpTarget = {
  source: "apiserver",
  baseUrl: job.baseUrl,
  timeoutMs: 30_000,
  tls: { verifyServer: true, caPem: job.caPem, certPem: job.certPem, keyPem: job.keyPem },
};
const clients = watchClients(target, { overFetch: job.transport === "fetch" })!;
let opened = 0;
let failures = 0;
const open = (i: number) =>
  openWatch(
    target,
    `/api/v1/namespaces/kube-system/secrets?fieldSelector=${
      encodeURIComponent(`metadata.name=secret-${i}`)
    }&watch=true&timeoutSeconds=3600`,
    undefined,
    { clients },
    {
      opened: () => opened++,
      event: () => {},
      ended: (failure) => {
        if (failure && failures++ === 0) console.error(failure.message);
      },
    },
  );

const gc = (globalThis as { gc?: () => void }).gc!;
async function rssAnonKb(): Promise<number> {
  gc();
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const status = await Deno.readTextFile("/proc/self/status");
  return Number(/RssAnon:\s+(\d+)/.exec(status)![1]);
}

async function until(what: string, done: () => boolean) {
  for (let i = 0; i < 1200 && !done(); i++) {
    if (failures > 0) throw new Error(`${failures} watches failed`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  if (!done()) throw new Error(`never: ${what}`);
}

open(0);
await until("the first watch open", () => opened === 1);
await new Promise((resolve) => setTimeout(resolve, job.settleMs));
const oneKb = await rssAnonKb();
const heapOneKb = Deno.memoryUsage().heapUsed / 1024;
const started = performance.now();
for (let i = 1; i < job.watches; i++) open(i);
await until("every watch open", () => opened === job.watches);
const openMs = Math.round(performance.now() - started);
await new Promise((resolve) => setTimeout(resolve, job.settleMs));
const allKb = await rssAnonKb();
const heapAllKb = Deno.memoryUsage().heapUsed / 1024;
const report: WatchMemoryReport = {
  oneKb,
  allKb,
  heapOneKb,
  heapAllKb,
  connections: clients.size,
  openMs,
};
console.log(JSON.stringify(report));
// The watches, still open, would keep the process running.
Deno.exit(0);
