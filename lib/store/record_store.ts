/**
 * A keyed store of records, one file each, held in memory and written through before memory
 * changes. The status store and the sandbox checkpoint store are this with their own codec.
 *
 * Guarantees: a write or delete of one key waits for the previous one of that key; if a write
 * fails, disk and memory keep the previous record (a write that failed after its rename is put
 * back); opening sweeps our temp files and moves every bad record into quarantine, reporting it
 * in `problems`, and serves the rest.
 */
import { join } from "node:path";
import {
  atomicWrite,
  removeDurably,
  sweepTempFiles,
  syncDir,
  tempPathFor,
  type WriteOptions,
  type WriteOutcome,
} from "../disk/atomic_write.ts";
import { compareIds } from "../core/ids.ts";
import { formatSchemaError } from "../core/schema_error.ts";
import { type Clock, systemClock } from "../core/time.ts";
import { ensureStoreDir, quarantine } from "./dirs.ts";
import { encodeRecord, RecordError, type RecordProblem } from "./envelope.ts";
import { KeyedLock } from "./keyed_lock.ts";
import { QUARANTINE_DIR, RECORD_FILE_MODE } from "./layout.ts";
import { readRecordDir, type RecordType } from "./record_files.ts";

export type Writer = (path: string, data: string, opts: WriteOptions) => Promise<WriteOutcome>;

export interface StoreOptions {
  /** Stamps the names of quarantined files. */
  clock?: Clock;
  /** The write path; atomicWrite unless a test injects a failure. */
  writer?: Writer;
}

/** A record met at open that could not be served. */
export interface StoreProblem {
  file: string;
  code: RecordProblem;
  problem: string;
  /** Where the file now is; absent when it could not be moved (then `problem` says why). */
  quarantinedTo?: string;
}

/** How one store turns what it serves (M) into what it writes (T), and back. */
export interface StoreCodec<M, T> {
  type: RecordType<T>;
  /** The fields to persist; validated against `type.schema` before anything is written. */
  toStored(value: M): unknown;
  /** What memory keeps for a stored record; `from` carries fields that live in memory only. */
  toMemory(stored: T, from?: M): M;
}

const WRITE_OPTIONS: WriteOptions = { mode: RECORD_FILE_MODE };

export class RecordStore<M, T> {
  readonly dir: string;
  #values = new Map<string, M>();
  #problems: StoreProblem[] = [];
  #swept: string[] = [];
  readonly #lock = new KeyedLock();

  private constructor(
    readonly stateDir: string,
    private readonly codec: StoreCodec<M, T>,
    private readonly clock: Clock,
    private readonly writer: Writer,
  ) {
    this.dir = join(stateDir, codec.type.dir);
  }

  static async open<M, T>(
    stateDir: string,
    codec: StoreCodec<M, T>,
    options: StoreOptions = {},
  ): Promise<RecordStore<M, T>> {
    await ensureStoreDir(stateDir, codec.type.dir);
    await ensureStoreDir(stateDir, QUARANTINE_DIR);
    const store = new RecordStore(
      stateDir,
      codec,
      options.clock ?? systemClock,
      options.writer ?? atomicWrite,
    );
    await store.load();
    return store;
  }

  /** Records the last load could not serve (each moved to quarantine). */
  get problems(): readonly StoreProblem[] {
    return this.#problems;
  }

  /** Temp files the last load removed: writes a crash interrupted. */
  get swept(): readonly string[] {
    return this.#swept;
  }

  /**
   * Rebuilds memory from disk. Meant for start-up: a write running meanwhile may be lost from
   * memory (never from disk).
   */
  async load(): Promise<void> {
    const swept = await sweepTempFiles(this.dir);
    const values = new Map<string, M>();
    const problems: StoreProblem[] = [];
    for (const entry of await readRecordDir(this.codec.type, this.dir)) {
      if (entry.error) problems.push(await this.#quarantine(entry.error));
      else values.set(entry.key, this.codec.toMemory(entry.record));
    }
    this.#values = values;
    this.#problems = problems;
    this.#swept = swept;
  }

  /** A copy of the record of `key`; InvalidIdError for a key that could not be stored. */
  get(key: string): M | undefined {
    this.codec.type.fileNameOf(key);
    const value = this.#values.get(key);
    return value === undefined ? undefined : structuredClone(value);
  }

  /** Every key, in byte order. */
  keys(): string[] {
    return [...this.#values.keys()].sort(compareIds);
  }

  /**
   * Persists `fn(copy of current)` and then makes it the record of `key`. If fn throws, its
   * result is invalid, or the write fails, nothing changes.
   */
  async update(key: string, fn: (current: M | undefined) => M): Promise<WriteOutcome> {
    const path = this.#pathOf(key);
    return await this.#lock.run(key, async () => {
      const next = fn(this.get(key));
      const stored = this.#storedForm(path, key, next);
      const outcome = await this.#write(path, key, stored);
      this.#values.set(key, this.codec.toMemory(stored, next));
      return outcome;
    });
  }

  /** Removes the record of `key`: nothing when there is none. */
  async delete(key: string): Promise<void> {
    const path = this.#pathOf(key);
    await this.#lock.run(key, async () => {
      // Renamed aside first, so the record vanishes in one step; the aside name is a temp
      // name of ours, so the next open sweeps it should we stop before removing it.
      const aside = tempPathFor(path);
      try {
        await Deno.rename(path, aside);
      } catch (e) {
        if (!(e instanceof Deno.errors.NotFound)) throw e;
        this.#values.delete(key);
        return;
      }
      try {
        await syncDir(this.dir);
      } catch (e) {
        await Deno.rename(aside, path).catch(() => {});
        throw e;
      }
      this.#values.delete(key);
      // The deletion is durable already; a leftover aside file is swept at the next open.
      await Deno.remove(aside).catch(() => {});
    });
  }

  #pathOf(key: string): string {
    return join(this.dir, this.codec.type.fileNameOf(key));
  }

  #storedForm(path: string, key: string, value: M): T {
    const parsed = this.codec.type.schema.safeParse(this.codec.toStored(value));
    if (!parsed.success) {
      throw new RecordError(
        path,
        "invalid-field",
        `refusing to write: ${formatSchemaError(parsed.error)}`,
      );
    }
    const claimed = this.codec.type.keyOfRecord(parsed.data);
    if (claimed !== key) {
      throw new RecordError(
        path,
        "misplaced",
        `refusing to write the record of ${JSON.stringify(claimed)} as ${JSON.stringify(key)}`,
      );
    }
    return parsed.data;
  }

  async #write(path: string, key: string, stored: T): Promise<WriteOutcome> {
    try {
      return await this.writer(path, encodeRecord(this.codec.type.kind, stored), WRITE_OPTIONS);
    } catch (e) {
      await this.#restore(path, key).catch(() => {});
      throw e;
    }
  }

  /**
   * A write can fail after its rename (in the directory fsync): put back the record memory
   * still holds, so that disk and memory agree. When the write failed earlier, the file is
   * already as it was and this finds nothing to do.
   */
  async #restore(path: string, key: string): Promise<void> {
    const previous = this.#values.get(key);
    if (previous === undefined) {
      await removeDurably(path);
      return;
    }
    const stored = this.#storedForm(path, key, previous);
    await this.writer(path, encodeRecord(this.codec.type.kind, stored), WRITE_OPTIONS);
  }

  async #quarantine(error: RecordError): Promise<StoreProblem> {
    const problem = { file: error.file, code: error.code, problem: error.problem };
    try {
      const movedTo = await quarantine(this.stateDir, this.dir, error.file, this.clock.now());
      return { ...problem, quarantinedTo: movedTo };
    } catch (e) {
      return {
        ...problem,
        problem: `${error.problem}; could not move it to quarantine: ${(e as Error).message}`,
      };
    }
  }
}
