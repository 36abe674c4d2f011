/**
 * A keyed store of records, one file each, held in memory and written through before memory
 * changes. The status store and the sandbox checkpoint store are this with their own codec.
 *
 * Guarantees: a write or delete of one key waits for the previous one of that key; if a write
 * fails, disk and memory keep the previous record (a write that failed after its rename is put
 * back); opening sweeps our temp files and moves every bad record into quarantine, reporting it
 * in `problems`, and serves the rest.
 *
 * A store that cannot be opened for writing (its directories cannot be made, a bad record cannot
 * be moved aside) can still be served read-only (`openOrRead`): what can be read is served, every
 * write is refused saying why, and `reopen` tries again.
 */
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
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
import { check } from "../core/schema.ts";
import { type Clock, systemClock } from "../core/time.ts";
import { ensureStoreDir, quarantine } from "./quarantine.ts";
import { encodeRecord, RecordError, type RecordProblem } from "./envelope.ts";
import { KeyedLock } from "../util/keyed_lock.ts";
import { QUARANTINE_DIR, RECORD_FILE_MODE } from "./layout.ts";
import { readRecordDir, type RecordType } from "./record_files.ts";

export type Writer = (path: string, data: string, opts: WriteOptions) => Promise<WriteOutcome>;

export interface StoreOptions {
  /** Stamps the names of quarantined files. */
  clock?: Clock;
  /** The write path; atomicWrite unless a test injects a failure. */
  writer?: Writer;
}

/** Why a store refuses writes: it could not be opened for writing. */
export class StoreReadOnlyError extends Error {
  override name = "StoreReadOnlyError";
}

/** A record met at open that could not be served. */
export interface StoreProblem {
  file: string;
  code: RecordProblem;
  problem: string;
  /** Where the file now is; absent when it could not be moved (then `problem` says why). */
  quarantinedTo?: string;
}

/** One store's records, and what of a record it is given is written. */
export interface StoreCodec<T> {
  type: RecordType<T>;
  /** The fields to persist; validated against `type.schema` before anything is written. */
  toStored(value: T): unknown;
}

const WRITE_OPTIONS: WriteOptions = { mode: RECORD_FILE_MODE };

export class RecordStore<T> {
  readonly dir: string;
  #values = new Map<string, T>();
  #problems: StoreProblem[] = [];
  #swept: string[] = [];
  /** Why writes are refused; undefined once the store is open for writing. */
  #readOnly: string | undefined = "not opened yet";
  readonly #lock = new KeyedLock();

  private constructor(
    readonly stateDir: string,
    private readonly codec: StoreCodec<T>,
    private readonly clock: Clock,
    private readonly writer: Writer,
  ) {
    this.dir = join(stateDir, codec.type.dir);
  }

  static async open<T>(
    stateDir: string,
    codec: StoreCodec<T>,
    options: StoreOptions = {},
  ): Promise<RecordStore<T>> {
    const store = RecordStore.#create(stateDir, codec, options);
    await store.#open();
    store.#readOnly = undefined;
    return store;
  }

  /**
   * Opens the store for writing, or, when that fails, serves it read-only: the sound records
   * that can be read (nothing is swept, created or moved), with `readOnly` saying why. Rejects
   * only on what no retry could mend (a bug), never on an I/O error.
   */
  static async openOrRead<T>(
    stateDir: string,
    codec: StoreCodec<T>,
    options: StoreOptions = {},
  ): Promise<RecordStore<T>> {
    const store = RecordStore.#create(stateDir, codec, options);
    if (!await store.reopen()) await store.#readSound();
    return store;
  }

  static #create<T>(stateDir: string, codec: StoreCodec<T>, options: StoreOptions) {
    return new RecordStore(
      stateDir,
      codec,
      options.clock ?? systemClock,
      options.writer ?? atomicWrite,
    );
  }

  async #open(): Promise<void> {
    await ensureStoreDir(this.stateDir, this.codec.type.dir);
    await ensureStoreDir(this.stateDir, QUARANTINE_DIR);
    await this.load();
  }

  /**
   * For a store served read-only: tries to open it for writing again (directories, sweep, load,
   * quarantine); true when it now is. Memory then holds what is on disk; when the attempt fails,
   * memory is left as it was. An open store answers true at once.
   */
  async reopen(): Promise<boolean> {
    if (this.#readOnly === undefined) return true;
    try {
      await this.#open();
    } catch (e) {
      this.#readOnly = `the store could not be opened for writing: ${(e as Error).message}`;
      return false;
    }
    const stuck = this.#problems.filter((p) => p.quarantinedTo === undefined);
    this.#readOnly = stuck.length === 0
      ? undefined
      : `bad records could not be moved to quarantine: ${stuck.map((p) => p.problem).join("; ")}`;
    return this.#readOnly === undefined;
  }

  /** Memory from a look at the directory that changes nothing; unreadable, it stays empty. */
  async #readSound(): Promise<void> {
    try {
      const entries = await readRecordDir(this.codec.type, this.dir);
      this.#values = new Map(
        entries.flatMap((e) => e.error ? [] : [[e.key, e.record] as const]),
      );
    } catch (e) {
      this.#readOnly += `; nothing could be read either: ${(e as Error).message}`;
    }
  }

  /** Why writes are refused (the store could not be opened for writing), or undefined. */
  get readOnly(): string | undefined {
    return this.#readOnly;
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
    const values = new Map<string, T>();
    const problems: StoreProblem[] = [];
    for (const entry of await readRecordDir(this.codec.type, this.dir)) {
      if (entry.error) problems.push(await this.#quarantine(entry.error));
      else values.set(entry.key, entry.record);
    }
    this.#values = values;
    this.#problems = problems;
    this.#swept = swept;
  }

  /** A copy of the record of `key`; InvalidIdError for a key that could not be stored. */
  get(key: string): T | undefined {
    this.codec.type.fileNameOf(key);
    const value = this.#values.get(key);
    return value === undefined ? undefined : structuredClone(value);
  }

  /** Whether there is a record of `key`. */
  has(key: string): boolean {
    return this.#values.has(key);
  }

  /** Every key, in byte order. */
  keys(): string[] {
    return [...this.#values.keys()].sort(compareIds);
  }

  /**
   * Persists `fn(copy of current)` and then makes it the record of `key`. If fn throws, its
   * result is invalid, or the write fails, nothing changes.
   */
  async update(key: string, fn: (current: T | undefined) => T): Promise<WriteOutcome> {
    const path = this.pathOf(key);
    this.#refuseIfReadOnly(path);
    return await this.#lock.run(key, async () => {
      const next = fn(this.get(key));
      const stored = this.#storedForm(path, key, next);
      const outcome = await this.#write(path, key, stored);
      this.#values.set(key, stored);
      return outcome;
    });
  }

  /** Removes the record of `key`: nothing when there is none. */
  async delete(key: string): Promise<void> {
    const path = this.pathOf(key);
    this.#refuseIfReadOnly(path);
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

  /**
   * Whether `value` is what the store holds for `key`, as it would be written (what toStored
   * leaves out does not count).
   */
  holds(key: string, value: T): boolean {
    const current = this.#values.get(key);
    return current !== undefined &&
      isDeepStrictEqual(this.codec.toStored(current), this.codec.toStored(value));
  }

  /** The file of `key`; InvalidIdError for a key that could not be stored. */
  pathOf(key: string): string {
    return join(this.dir, this.codec.type.fileNameOf(key));
  }

  #refuseIfReadOnly(path: string) {
    if (this.#readOnly !== undefined) {
      throw new StoreReadOnlyError(`${path}: not written: ${this.#readOnly}`);
    }
  }

  #storedForm(path: string, key: string, value: T): T {
    const { schema } = this.codec.type;
    const parsed = check(schema, this.codec.toStored(value));
    if (!parsed.success) {
      throw new RecordError(
        path,
        "invalid-field",
        `refusing to write: ${formatSchemaError(schema, parsed.issues)}`,
      );
    }
    const claimed = this.codec.type.keyOfRecord(parsed.output);
    if (claimed !== key) {
      throw new RecordError(
        path,
        "misplaced",
        `refusing to write the record of ${JSON.stringify(claimed)} as ${JSON.stringify(key)}`,
      );
    }
    return parsed.output;
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
