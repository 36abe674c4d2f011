/**
 * One step of the demo's story as it happens: what changes in the world, the agent's passes
 * (each with what it observed, decided and wrote), and the expectations checked afterwards.
 * A step's record is what `ckpt-agent demo --output json` prints for it.
 */
import { trackedFromStore } from "../pass/observe.ts";
import type { AppliedAction, PassError, PassReport } from "../pass/report.ts";
import type { PlanDocument } from "../core/snapshot.ts";
import { formatInstant } from "../core/time.ts";
import type { SourceName } from "../sources/types.ts";
import {
  type DiskChanges,
  diskChanges,
  type DiskEntry,
  type DiskListing,
  listDisk,
} from "./disk.ts";
import type { DemoSession } from "./session.ts";

const SOURCES: SourceName[] = ["apiserver", "kubelet", "runtime"];

export type FileView = Omit<DiskEntry, "ino" | "mtimeMs">;

export interface PassRecord {
  /** A dry run observes and plans, and writes nothing: `ckpt-agent --once --dry-run`. */
  dryRun: boolean;
  /** The agent's clock when the pass began. */
  at: string;
  complete: boolean;
  /** "ok", or how the source failed. */
  sources: Record<SourceName, string>;
  plan: PlanDocument;
  changes: PassReport["changes"];
  applied: AppliedAction[];
  errors: PassError[];
  /** What the pass changed on disk, read from the disk. */
  disk: { created: FileView[]; changed: FileView[]; removed: string[] };
  log: Record<string, unknown>[];
}

/** Narration says what happens to the node, or what a pass meant. */
export type StepEvent = { type: "narration"; text: string } | ({ type: "pass" } & PassRecord);

export interface Check {
  expect: string;
  held: boolean;
  /** What was seen instead, when the expectation did not hold. */
  saw?: string;
}

export interface StepRecord {
  name: string;
  title: string;
  /** Every pass of the step was a dry run: its plan was shown, not carried out. */
  dryRun: boolean;
  events: StepEvent[];
  /** What this step's passes planned, in pass order. */
  plan: { starts: string[]; stops: string[]; removes: string[] };
  changes: PassReport["changes"];
  /** The files in the kubelet's static-pod dir after the step. */
  staticPodDir: string[];
  /** Pods the container runtime runs after the step (namespace/name). */
  running: string[];
  checks: Check[];
  /** Every expectation of the step held. */
  ok: boolean;
}

function view(entry: DiskEntry): FileView {
  const { ino: _ino, mtimeMs: _mtime, ...rest } = entry;
  return rest;
}

function viewChanges(changes: DiskChanges): PassRecord["disk"] {
  return {
    created: changes.created.map(view),
    changed: changes.changed.filter((e) => e.type === "file").map(view),
    removed: changes.removed,
  };
}

export class Step {
  readonly #session: DemoSession;
  readonly #signal: AbortSignal;
  readonly #events: StepEvent[] = [];
  readonly #checks: Check[] = [];
  /** The disk after the latest pass of the step. */
  disk: DiskListing = new Map();

  constructor(
    readonly name: string,
    readonly title: string,
    session: DemoSession,
    signal: AbortSignal,
  ) {
    this.#session = session;
    this.#signal = signal;
  }

  /** The directories the agent writes, which the demo lists before and after each pass. */
  get #watched(): string[] {
    const c = this.#session.config;
    return [c.staticPodDir, c.inactiveDir, c.secretsDir, c.configmapsDir, c.stateDir];
  }

  say(text: string): void {
    this.#signal.throwIfAborted();
    this.#events.push({ type: "narration", text });
  }

  /** A pass of the agent as the daemon runs it: observe, plan, write, persist. */
  pass(): Promise<PassRecord> {
    return this.#pass(false);
  }

  /** What `--once --dry-run` would show now: the same pass, writing nothing (checked). */
  async dryRun(): Promise<PassRecord> {
    const pass = await this.#pass(true);
    const { created, changed, removed } = pass.disk;
    this.expect(
      "a dry run writes nothing",
      created.length + changed.length + removed.length === 0,
      pass.disk,
    );
    return pass;
  }

  async #pass(dryRun: boolean): Promise<PassRecord> {
    this.#signal.throwIfAborted();
    const { agent, stores, clock, node, takeLog } = this.#session;
    const before = await listDisk(node.root, this.#watched);
    const at = formatInstant(clock.now());
    const report = dryRun
      ? await agent.plan(trackedFromStore(stores.status))
      : await agent.pass(stores);
    this.disk = await listDisk(node.root, this.#watched);
    const sources = Object.fromEntries(SOURCES.map((source) => {
      const failure = report.failures.find((f) => f.source === source);
      return [source, failure ? `${failure.kind}: ${failure.message}` : "ok"];
    })) as Record<SourceName, string>;
    const record: PassRecord = {
      dryRun,
      at,
      complete: report.complete,
      sources,
      plan: report.plan,
      changes: report.changes,
      applied: report.applied,
      errors: report.errors,
      disk: viewChanges(diskChanges(before, this.disk)),
      log: takeLog(),
    };
    this.#events.push({ type: "pass", ...record });
    return record;
  }

  expect(what: string, held: boolean, saw?: unknown): void {
    this.#checks.push(
      held || saw === undefined ? { expect: what, held } : {
        expect: what,
        held,
        saw: typeof saw === "string" ? saw : JSON.stringify(saw),
      },
    );
  }

  /** The pods the runtime runs now, as the agent's own runtime client sees them. */
  async running(): Promise<string[]> {
    const result = await this.#session.runtime.listRunningPods();
    // Never in the story; shown as it is rather than as "nothing runs".
    if (!result.ok) return [`(the runtime did not answer: ${result.failure.kind})`];
    return result.value.map((p) => `${p.namespace}/${p.name}`).sort();
  }

  async staticPodDir(): Promise<string[]> {
    const names: string[] = [];
    for await (const entry of Deno.readDir(this.#session.config.staticPodDir)) {
      names.push(entry.name);
    }
    return names.sort();
  }

  async finish(): Promise<StepRecord> {
    const passes = this.#events.filter((e) => e.type === "pass");
    return {
      name: this.name,
      title: this.title,
      dryRun: passes.every((p) => p.dryRun),
      events: this.#events,
      plan: {
        starts: passes.flatMap((p) => p.plan.starts),
        stops: passes.flatMap((p) => p.plan.stops),
        removes: passes.flatMap((p) => p.plan.removes),
      },
      changes: passes.flatMap((p) => p.changes),
      staticPodDir: await this.staticPodDir(),
      running: await this.running(),
      checks: this.#checks,
      ok: this.#checks.every((c) => c.held),
    };
  }
}
