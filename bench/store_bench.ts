/**
 * Store benchmark: update latency (each update fsyncs the file and its directory) and the time
 * to open a status store of 10,000 records. Figures go to docs/benchmarks.md, "Stores".
 *
 *   deno task bench [--dir DIR] [--updates N] [--records N]
 *
 * DIR must be on the disk being measured: fsync on tmpfs costs nothing.
 */
import { parseArgs } from "node:util";
import { join } from "node:path";
import { runChecks } from "../lib/verify/verify.ts";
import { encodeRecord } from "../lib/store/envelope.ts";
import {
  RECORD_FILE_MODE,
  STATUS_DIR,
  statusFileName,
  STORE_DIR_MODE,
} from "../lib/store/layout.ts";
import { STATUS_RECORDS, type StatusRecord } from "../lib/store/status_record.ts";
import { recordCheck } from "../lib/verify/records.ts";
import { StatusStore } from "../lib/store/status_store.ts";

const { values: flags } = parseArgs({
  args: Deno.args,
  options: {
    dir: { type: "string" },
    updates: { type: "string", default: "2000" },
    records: { type: "string", default: "10000" },
  },
});
const UPDATES = Number(flags.updates);
const RECORDS = Number(flags.records);
const LOAD_RUNS = 5;
const UPDATE_IDS = 100;

function record(id: string, n: number): StatusRecord {
  return {
    id,
    state: n % 2 === 0 ? "active" : "active-grace",
    ...(n % 2 === 0 ? {} : { graceEnd: "2026-01-01T00:01:00Z" }),
    createdAt: "2026-01-01T00:00:00Z",
    lastActivatedAt: "2026-01-01T00:00:10Z",
    reason: "ParentNotRunning",
    message: `update ${n}: the API server is down and the parent is not running`,
  };
}

/** Nearest-rank percentile of sorted samples. */
function percentile(sorted: number[], p: number): number {
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)];
}

const ms = (x: number) => `${x.toFixed(2)} ms`;

async function time<T>(fn: () => Promise<T>): Promise<[number, T]> {
  const start = performance.now();
  const result = await fn();
  return [performance.now() - start, result];
}

function summary(samples: number[]): string {
  const sorted = [...samples].sort((a, b) => a - b);
  return `p50 ${ms(percentile(sorted, 50))}, p90 ${ms(percentile(sorted, 90))}, ` +
    `p99 ${ms(percentile(sorted, 99))}, max ${ms(sorted.at(-1)!)}`;
}

async function benchUpdates(stateDir: string): Promise<void> {
  const store = await StatusStore.open(stateDir);
  const ids = Array.from({ length: UPDATE_IDS }, (_, i) => `kube-system/pod-${i}`);
  for (const id of ids) await store.update(id, () => record(id, 0));
  const written: number[] = [], unchanged: number[] = [];
  for (let n = 1; n <= UPDATES; n++) {
    const id = ids[n % ids.length];
    written.push((await time(() => store.update(id, () => record(id, n))))[0]);
    unchanged.push((await time(() => store.update(id, (current) => current!)))[0]);
  }
  console.log(`update, written (fsync file + dir), ${UPDATES} updates: ${summary(written)}`);
  console.log(`update, unchanged (compare only), ${UPDATES} updates: ${summary(unchanged)}`);
}

async function benchLoad(stateDir: string): Promise<void> {
  const dir = join(stateDir, STATUS_DIR);
  await Deno.mkdir(dir, { recursive: true, mode: STORE_DIR_MODE });
  // Set-up only: written without fsync, the benchmark measures reading them back.
  for (let i = 0; i < RECORDS; i++) {
    const id = `ns-${i % 50}/pod-${i}`;
    await Deno.writeTextFile(join(dir, statusFileName(id)), encodeRecord("status", record(id, i)), {
      mode: RECORD_FILE_MODE,
    });
  }
  const opens: number[] = [];
  for (let run = 0; run < LOAD_RUNS; run++) {
    const [elapsed, store] = await time(() => StatusStore.open(stateDir));
    if (store.list().length !== RECORDS || store.problems.length > 0) {
      throw new Error(`loaded ${store.list().length} records, ${store.problems.length} problems`);
    }
    opens.push(elapsed);
  }
  const sorted = [...opens].sort((a, b) => a - b);
  console.log(
    `open (sweep, read and check every record) of ${RECORDS} records, ${LOAD_RUNS} runs, ` +
      `warm cache: ` +
      `median ${ms(percentile(sorted, 50))}, min ${ms(sorted[0])}, max ${ms(sorted.at(-1)!)}`,
  );
  const checks = [recordCheck("status records", STATUS_RECORDS, stateDir)];
  const [verifyTime, report] = await time(() => runChecks(stateDir, checks));
  console.log(`ckpt-agent verify's checks over ${report.checked} records: ${ms(verifyTime)}`);
}

const base = flags.dir ?? await Deno.makeTempDir({ prefix: "ckpt-bench-" });
const root = await Deno.makeTempDir({ dir: base, prefix: "run-" });
try {
  console.log(`bench directory: ${root}`);
  await benchUpdates(join(root, "updates"));
  await benchLoad(join(root, "load"));
} finally {
  await Deno.remove(flags.dir ? root : base, { recursive: true });
}
