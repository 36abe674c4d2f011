/**
 * The sandbox checkpoint store: one record per pod sandbox id under `<state dir>/sandboxes/`
 * (docs/design.md#stores). Sandbox ids are validated before any path is built from them.
 */
import type { WriteOutcome } from "../disk/atomic_write.ts";
import { RecordStore, type StoreOptions, type StoreProblem } from "./record_store.ts";
import { SANDBOX_CODEC, type SandboxCheckpoint, type SandboxRecord } from "./sandbox_checkpoint.ts";

export class SandboxStore {
  private constructor(private readonly records: RecordStore<SandboxRecord>) {}

  /** Creates the directories when missing, sweeps temp files, loads, quarantines bad records. */
  static async open(stateDir: string, options: StoreOptions = {}): Promise<SandboxStore> {
    return new SandboxStore(await RecordStore.open(stateDir, SANDBOX_CODEC, options));
  }

  /** Bad records met by the last load, each moved to quarantine. */
  get problems(): readonly StoreProblem[] {
    return this.records.problems;
  }

  /** Temp files the last load swept. */
  get swept(): readonly string[] {
    return this.records.swept;
  }

  /**
   * Stores the checkpoint of a sandbox, replacing any earlier one; "unchanged" when it is the
   * same. An invalid id is an InvalidIdError, an invalid checkpoint a RecordError.
   */
  create(sandboxId: string, checkpoint: SandboxCheckpoint): Promise<WriteOutcome> {
    return this.records.update(sandboxId, () => ({ sandboxId, checkpoint }));
  }

  /** A copy of the checkpoint of a sandbox. */
  get(sandboxId: string): SandboxCheckpoint | undefined {
    return this.records.get(sandboxId)?.checkpoint;
  }

  /** Removes the checkpoint of a sandbox; no error when there is none. */
  remove(sandboxId: string): Promise<void> {
    return this.records.delete(sandboxId);
  }

  /** The sandbox ids with a checkpoint, sorted. */
  list(): string[] {
    return this.records.keys();
  }

  /** Rebuilds memory from disk (see `open`). */
  load(): Promise<void> {
    return this.records.load();
  }
}
