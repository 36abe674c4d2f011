/**
 * The status store: one record per checkpoint id under `<state dir>/status/`, so that a
 * restarted agent keeps its states and grace deadlines (docs/design.md#stores).
 */
import { join } from "node:path";
import type { WriteOutcome } from "../disk/atomic_write.ts";
import { readRecordDir } from "./record_files.ts";
import { RecordStore, type StoreOptions, type StoreProblem } from "./record_store.ts";
import {
  phaseOf,
  STATUS_CODEC,
  STATUS_RECORDS,
  type StatusRecord,
  type StatusView,
} from "./status_record.ts";

function view(record: StatusRecord): StatusView {
  return { ...record, phase: phaseOf(record) };
}

export class StatusStore {
  private constructor(private readonly records: RecordStore<StatusRecord>) {}

  /** Creates the directories when missing, sweeps temp files, loads, quarantines bad records. */
  static async open(stateDir: string, options: StoreOptions = {}): Promise<StatusStore> {
    return new StatusStore(await RecordStore.open(stateDir, STATUS_CODEC, options));
  }

  /** Bad records met by the last load, each moved to quarantine. */
  get problems(): readonly StoreProblem[] {
    return this.records.problems;
  }

  /** Temp files the last load swept. */
  get swept(): readonly string[] {
    return this.records.swept;
  }

  /** A copy of the record of `id`; throws InvalidIdError for an id that cannot be stored. */
  get(id: string): StatusView | undefined {
    const record = this.records.get(id);
    return record && view(record);
  }

  /** Copies of every record, sorted by id. */
  list(): StatusView[] {
    return this.records.keys().map((id) => view(this.records.get(id)!));
  }

  /**
   * Runs `fn` on a copy of the current record (undefined when there is none) and persists its
   * result in one transaction; "unchanged" when the stored bytes would be the same. If fn
   * throws, returns an invalid record (a RecordError) or the write fails, disk and memory stay
   * as they were. Updates of one id run one after the other. A returned `phase` is ignored.
   */
  update(id: string, fn: (current: StatusView | undefined) => StatusRecord): Promise<WriteOutcome> {
    return this.records.update(id, (current) => fn(current && view(current)));
  }

  /** Removes the record of `id` durably; nothing happens when there is none. */
  delete(id: string): Promise<void> {
    return this.records.delete(id);
  }

  /** Rebuilds memory from disk (see `open`). */
  load(): Promise<void> {
    return this.records.load();
  }
}

/**
 * The sound records of a state directory, read without opening the store: nothing is swept,
 * created or quarantined. For passes that must not write (dry run, snapshot); a bad record is
 * left for `verify` to report and for the daemon's store to quarantine.
 */
export async function readStatusRecords(stateDir: string): Promise<StatusRecord[]> {
  const entries = await readRecordDir(STATUS_RECORDS, join(stateDir, STATUS_RECORDS.dir));
  return entries.flatMap((entry) => entry.error ? [] : [entry.record]);
}
