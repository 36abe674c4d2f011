/**
 * What loading a module costs the daemon's process, before it does anything: for each module
 * named, `deno run` with the unit's flags and glibc settings (scripts/permissions.ts) on
 * bench/import_waiter.ts, which imports it (through deno.json's import map, so `valibot` or
 * `../lib/commands/run.ts` work) and waits; after `--seconds`, its RSS split into anonymous and
 * file-backed pages (`/proc/<pid>/status`), and, beside it, the same for a process that imports
 * nothing.
 *
 *   deno run -A bench/import_cost.ts [--seconds 4] [--deno-flags "--flag ..."] SPEC...
 *
 * e.g. `valibot yaml hono node:https ../lib/commands/run.ts` (relative to bench/).
 */
import { parseArgs } from "node:util";
import { AGENT_MALLOC_ENV, agentDenoFlags } from "../scripts/permissions.ts";
import { memoryOf } from "./daemon_bench.ts";

const { values: flags, positionals } = parseArgs({
  args: Deno.args,
  options: {
    seconds: { type: "string", default: "4" },
    /** More Deno flags for the probed process, after the unit's. */
    "deno-flags": { type: "string", default: "" },
  },
  allowPositionals: true,
});
const WAITER = new URL("./import_waiter.ts", import.meta.url).pathname;
const extra = flags["deno-flags"].split(" ").filter(Boolean);
const mib = (kb: number) => (kb / 1024).toFixed(1).padStart(6);

async function measure(spec: string | undefined) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", ...agentDenoFlags(), ...extra, WAITER, ...(spec ? [spec] : [])],
    env: AGENT_MALLOC_ENV,
    stdout: "null",
  }).spawn();
  try {
    await new Promise((r) => setTimeout(r, Number(flags.seconds) * 1000));
    const memory = memoryOf(child.pid);
    if (!memory) throw new Error(`importing ${spec} failed`);
    return memory;
  } finally {
    child.kill("SIGKILL");
    await child.status;
  }
}

const idle = await measure(undefined);
console.log(`MiB ${"anon".padStart(6)} ${"file".padStart(6)}  over nothing (anon, file)`);
console.log(`    ${mib(idle.anon)} ${mib(idle.file)}  (nothing)`);
for (const spec of positionals) {
  const m = await measure(spec);
  console.log(
    `    ${mib(m.anon)} ${mib(m.file)}  ${mib(m.anon - idle.anon)} ${
      mib(m.file - idle.file)
    }  ${spec}`,
  );
}
