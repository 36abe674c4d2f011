/**
 * Crash test: a child process writes records in a loop and is killed with SIGKILL at a random
 * moment, again and again. After every kill both stores must open with every record equal to its
 * last acknowledged value or to the one being written (never torn, never missing), and no temp
 * file may survive the open.
 *
 * The normal test run kills 40 times; the full run (500 kills) is `deno task crash-test`, and
 * any count is `CKPT_CRASH_KILLS=N deno test --allow-all tests/store/crash_test.ts`.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { join } from "node:path";
import { TEMP_MARKER } from "../../lib/disk/atomic_write.ts";
import { SandboxStore } from "../../lib/store/sandbox_store.ts";
import { StatusStore } from "../../lib/store/status_store.ts";
import { ALL_OPS, type Op, opOf, seqIn, type Stores, write } from "./crash_ops.ts";
import { listDir, withStateDir } from "./records.ts";

const KILLS = Number(Deno.env.get("CKPT_CRASH_KILLS") ?? "40");
/** Kills land up to this long after the child is ready: tens of fsynced writes. */
const MAX_KILL_DELAY_MS = 25;

const CHILD = new URL("./crash_child.ts", import.meta.url).pathname;
const CONFIG = new URL("../../deno.json", import.meta.url).pathname;

const keyOf = (op: Op) => `${op.store}:${op.key}`;

interface ChildRun {
  acks: number[];
  killed: boolean;
  stderr: string;
}

/** Runs the child from `start`, kills it at a random moment after it is ready. */
async function runChild(stateDir: string, start: number): Promise<ChildRun> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", "--quiet", "--config", CONFIG, CHILD, stateDir, String(start)],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const acks: number[] = [];
  let markReady!: () => void;
  const ready = new Promise<void>((resolve) => markReady = resolve);
  const reading = (async () => {
    let pending = "";
    for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
      const lines = (pending + chunk).split("\n");
      pending = lines.pop()!; // a line cut short by the kill was never acknowledged
      for (const line of lines) {
        if (line === "ready") markReady();
        else if (line.startsWith("ack ")) acks.push(Number(line.slice(4)));
      }
    }
  })();
  const stderr = new Response(child.stderr).text();
  const exited = child.status;
  // The child either becomes ready or dies by itself; either way this wait ends.
  const first = await Promise.race([ready.then(() => "ready"), exited.then(() => "exited")]);
  if (first === "ready") {
    await new Promise((resolve) => setTimeout(resolve, Math.random() * MAX_KILL_DELAY_MS));
    try {
      child.kill("SIGKILL");
    } catch {
      // Already gone: reported below through its status.
    }
  }
  const status = await exited;
  await reading;
  return { acks, killed: status.signal === "SIGKILL", stderr: await stderr };
}

async function tempFiles(stateDir: string): Promise<string[]> {
  const found: string[] = [];
  for (const sub of ["status", "sandboxes"]) {
    for (const name of await listDir(join(stateDir, sub))) {
      if (name.includes(TEMP_MARKER)) found.push(join(sub, name));
    }
  }
  return found;
}

async function openStores(stateDir: string): Promise<Stores> {
  return {
    statuses: await StatusStore.open(stateDir),
    sandboxes: await SandboxStore.open(stateDir),
  };
}

/** What each key holds after opening both stores, as sequence numbers; problems as findings. */
async function openAndRead(
  stateDir: string,
): Promise<{ values: Map<string, number>; findings: string[] }> {
  const stores = await openStores(stateDir);
  const problems = [...stores.statuses.problems, ...stores.sandboxes.problems];
  const values = new Map<string, number>();
  for (const op of ALL_OPS) {
    const seq = seqIn(stores, op);
    if (seq !== undefined) values.set(keyOf(op), seq);
  }
  return { values, findings: problems.map((p) => `torn or invalid: ${p.file}: ${p.problem}`) };
}

Deno.test(`crash test: ${KILLS} SIGKILLs mid-write, nothing torn, lost or left over`, async () => {
  await withStateDir(async (stateDir) => {
    // Every key exists before the first kill, so "missing" is always a loss.
    const stores = await openStores(stateDir);
    for (let seq = 0; seq < ALL_OPS.length; seq++) await write(stores, seq);
    const durable = new Map(ALL_OPS.map((op, seq) => [keyOf(op), seq]));
    let next = ALL_OPS.length;
    let kills = 0, writes = 0, tempsSwept = 0, inFlightLanded = 0;
    const findings: string[] = [];

    while (kills < KILLS && findings.length === 0) {
      const run = await runChild(stateDir, next);
      if (!run.killed) {
        findings.push(`child ended by itself: ${run.stderr.trim()}`);
        break;
      }
      kills++;
      writes += run.acks.length;
      for (const seq of run.acks) durable.set(keyOf(opOf(seq)), seq);
      const inFlight = (run.acks.at(-1) ?? next - 1) + 1;
      const inFlightKey = keyOf(opOf(inFlight));

      tempsSwept += (await tempFiles(stateDir)).length;
      const { values, findings: opened } = await openAndRead(stateDir);
      findings.push(...opened.map((f) => `kill ${kills}: ${f}`));
      for (const [key, acknowledged] of durable) {
        const found = values.get(key);
        const allowed = key === inFlightKey ? [acknowledged, inFlight] : [acknowledged];
        if (found === undefined) findings.push(`kill ${kills}: ${key} is missing`);
        else if (!allowed.includes(found)) {
          findings.push(`kill ${kills}: ${key} holds write ${found}, expected ${allowed}`);
        }
      }
      for (const leftover of await tempFiles(stateDir)) {
        findings.push(`kill ${kills}: temp file survived the open: ${leftover}`);
      }
      if (values.get(inFlightKey) === inFlight) {
        inFlightLanded++;
        durable.set(inFlightKey, inFlight);
        next = inFlight + 1;
      } else {
        next = inFlight;
      }
    }

    console.log(
      `crash test: ${kills} kills, ${writes} acknowledged writes, ${inFlightLanded} kills after ` +
        `an unacknowledged write landed, ${tempsSwept} temp files swept; ` +
        `${findings.length} findings (torn, lost, wrong or leftover)`,
    );
    for (const finding of findings) console.log(`  ${finding}`);
    assertEquals(findings, []);
    assertEquals(kills, KILLS);
  });
});
