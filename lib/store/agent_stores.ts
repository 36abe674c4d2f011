/**
 * The agent's state as its passes use it: what the agent knows, held in memory, and the two
 * stores that keep a durable copy of it. Memory is the truth each pass starts from; `record`
 * brings the stores up to it, writing every record that differs from the stored one and deleting
 * every stored record memory no longer has. What could not be written stays different and is
 * tried again by the next `record`: a state dir that is read-only, full or failing never makes
 * the agent lose track (a grace deadline keeps running in memory) and never stops it.
 *
 * A store that cannot be opened for writing is served read-only from what can be read, and
 * opening is tried again by every `record`, so that a state dir remounted read-write is used from
 * then on without a restart.
 */
import { compareIds } from "../core/ids.ts";
import type { Logger } from "../util/log.ts";
import { mapConcurrent } from "../util/map_concurrent.ts";
import { RecordStore, type StoreOptions } from "./record_store.ts";
import { SANDBOX_CODEC, type SandboxCheckpoint, type SandboxRecord } from "./sandbox_checkpoint.ts";
import { phaseOf, STATUS_CODEC, type StatusRecord, type StatusView } from "./status_record.ts";

export type StoreName = "status" | "sandboxes";

/**
 * Records written at once. Each write is a temp file, its fsync, a rename and the directory's
 * fsync; one after the other, the status records of a hundred checkpoints activated at once
 * took 0.7 s after the activation, and a loss told meanwhile waited for them.
 */
const RECORDS_IN_FLIGHT = 8;

/** A difference between memory and a store that the last `record` could not remove. */
export interface Unrecorded {
  store: StoreName;
  key: string;
  /** What the store lacks: the record memory holds, or the deletion of one it no longer holds. */
  op: "write" | "delete";
  /** The record's file (the store's directory when the key cannot name one). */
  path: string;
  error: string;
}

export interface StoreOutcome {
  written: string[];
  deleted: string[];
  unrecorded: Unrecorded[];
  /** Records not tried, the call being cut short: still to be written. */
  left: number;
}

/** What writing one record came to. */
type Recorded = "written" | "deleted" | "same" | Unrecorded;

/** One store and the memory it keeps a copy of. */
class Mirror<T> {
  readonly #memory: Map<string, T>;
  /** Keys whose record may differ from the stored one: changed since, or not yet written. */
  readonly #dirty = new Set<string>();
  unrecorded: Unrecorded[] = [];

  constructor(readonly name: StoreName, readonly store: RecordStore<T>) {
    this.#memory = new Map(store.keys().map((key) => [key, store.get(key)!]));
  }

  /** The record of `key`, not a copy: callers never modify it. */
  peek(key: string): T | undefined {
    return this.#memory.get(key);
  }

  /** A copy; InvalidIdError for a key no record could be stored under. */
  get(key: string): T | undefined {
    this.store.pathOf(key);
    const value = this.#memory.get(key);
    return value === undefined ? undefined : structuredClone(value);
  }

  keys(): string[] {
    return [...this.#memory.keys()].sort(compareIds);
  }

  set(key: string, value: T) {
    this.#memory.set(key, value);
    this.#dirty.add(key);
  }

  delete(key: string) {
    if (this.#memory.delete(key)) this.#dirty.add(key);
  }

  /** After a reload of the store, any record may differ. */
  #compareAll() {
    for (const key of [...this.#memory.keys(), ...this.store.keys()]) this.#dirty.add(key);
  }

  /** Tries to open a read-only store for writing; the reason it stays read-only, if it does. */
  async reopen(): Promise<string | undefined> {
    if (this.store.readOnly === undefined) return undefined;
    if (await this.store.reopen()) this.#compareAll();
    return this.store.readOnly;
  }

  /**
   * Writes and deletes what memory and the store disagree on, RECORDS_IN_FLIGHT at a time (each
   * record is its own file); the outcome lists keys in order, whichever finished first. Once
   * `cut` is aborted no further key is started: those stay to be written by the next call.
   */
  async record(cut?: AbortSignal): Promise<StoreOutcome> {
    const outcome: StoreOutcome = { written: [], deleted: [], unrecorded: [], left: 0 };
    const keys = [...this.#dirty].sort(compareIds);
    const done = await mapConcurrent(
      keys,
      RECORDS_IN_FLIGHT,
      (key): Promise<"left" | Recorded> =>
        cut?.aborted ? Promise.resolve("left") : this.#recordOne(key),
    );
    keys.forEach((key, i) => {
      const one = done[i];
      if (one === "written" || one === "deleted") outcome[one].push(key);
      else if (one === "left") outcome.left++;
      else if (one !== "same") outcome.unrecorded.push(one);
    });
    this.unrecorded = outcome.unrecorded;
    return outcome;
  }

  async #recordOne(key: string): Promise<Recorded> {
    const value = this.#memory.get(key);
    const op = value === undefined ? "delete" : "write";
    try {
      let done: "written" | "deleted" | "same" = "same";
      if (value === undefined) {
        if (this.store.has(key)) {
          await this.store.delete(key);
          done = "deleted";
        }
      } else if (!this.store.holds(key, value)) {
        await this.store.update(key, () => value);
        done = "written";
      }
      this.#dirty.delete(key);
      return done;
    } catch (e) {
      return { store: this.name, key, op, path: this.#pathOf(key), error: (e as Error).message };
    }
  }

  #pathOf(key: string): string {
    try {
      return this.store.pathOf(key);
    } catch {
      return this.store.dir;
    }
  }
}

export class AgentStores {
  readonly #status: Mirror<StatusRecord>;
  readonly #sandboxes: Mirror<SandboxRecord>;
  /** Why the stores are read-only, as last logged: a change is logged once. */
  #saidReadOnly?: string;

  private constructor(
    readonly stateDir: string,
    status: RecordStore<StatusRecord>,
    sandboxes: RecordStore<SandboxRecord>,
    private readonly log: Logger,
  ) {
    this.#status = new Mirror("status", status);
    this.#sandboxes = new Mirror("sandboxes", sandboxes);
  }

  /**
   * Opens both stores, for writing when it can be done and read-only otherwise; never fails on
   * the state dir. Records moved to quarantine and a read-only state dir are logged.
   */
  static async open(
    stateDir: string,
    log: Logger,
    options: StoreOptions = {},
  ): Promise<AgentStores> {
    const stores = new AgentStores(
      stateDir,
      await RecordStore.openOrRead(stateDir, STATUS_CODEC, options),
      await RecordStore.openOrRead(stateDir, SANDBOX_CODEC, options),
      log,
    );
    stores.#logOpen();
    return stores;
  }

  /** What the agent holds of each checkpoint: the last pass's states (the store's at start). */
  readonly status = {
    /** A copy, with its phase; InvalidIdError for an id that cannot name a record. */
    get: (id: string): StatusView | undefined => {
      const record = this.#status.get(id);
      return record && { ...record, phase: phaseOf(record) };
    },
    /** Copies of every record, sorted by id. */
    list: (): StatusView[] => this.#status.keys().map((id) => this.status.get(id)!),
    /**
     * Every record as the agent holds it, sorted by id: not copies (never modify them), for
     * what every pass reads several times.
     */
    peekAll: (): StatusRecord[] => this.#status.keys().map((id) => this.#status.peek(id)!),
  };

  /** The sandboxes of active checkpoints the agent holds. */
  readonly sandboxes = {
    /** A copy; InvalidIdError for an id that cannot name a record. */
    get: (sandboxId: string): SandboxCheckpoint | undefined =>
      this.#sandboxes.get(sandboxId)?.checkpoint,
    /** Their ids, sorted. */
    list: (): string[] => this.#sandboxes.keys(),
  };

  /** The record of a checkpoint as the agent holds it (not a copy: never modify it). */
  peekStatus(id: string): StatusRecord | undefined {
    return this.#status.peek(id);
  }

  setStatus(id: string, record: StatusRecord) {
    this.#status.set(id, record);
  }

  forgetStatus(id: string) {
    this.#status.delete(id);
  }

  setSandbox(sandboxId: string, checkpoint: SandboxCheckpoint) {
    this.#sandboxes.set(sandboxId, { sandboxId, checkpoint });
  }

  forgetSandbox(sandboxId: string) {
    this.#sandboxes.delete(sandboxId);
  }

  /**
   * Brings both stores up to memory: a read-only store is first opened again if it now can be,
   * then every differing record is written and every stale one deleted. Never throws; what
   * could not be done is in the outcome, and in `unrecorded` until a later `record` does it.
   * `cut`: see Mirror.record.
   */
  async record(cut?: AbortSignal): Promise<Record<StoreName, StoreOutcome>> {
    const wasReadOnly = this.readOnly;
    const stillReadOnly = [await this.#status.reopen(), await this.#sandboxes.reopen()];
    if (wasReadOnly !== undefined && this.readOnly === undefined) {
      this.log.info("state dir writable again: every record not yet written is written now", {
        stateDir: this.stateDir,
      });
      this.#saidReadOnly = undefined;
      this.#logQuarantined();
    } else if (stillReadOnly.some((why) => why !== undefined)) {
      this.#logReadOnly();
    }
    return { status: await this.#status.record(cut), sandboxes: await this.#sandboxes.record(cut) };
  }

  /** What the last `record` could not write or delete, status records first. */
  unrecorded(): Unrecorded[] {
    return [...this.#status.unrecorded, ...this.#sandboxes.unrecorded];
  }

  /** Why the stores are served read-only (the state dir could not be opened for writing). */
  get readOnly(): string | undefined {
    return this.#status.store.readOnly ?? this.#sandboxes.store.readOnly;
  }

  #logOpen() {
    this.#logQuarantined();
    if (this.readOnly !== undefined) this.#logReadOnly();
  }

  #logQuarantined() {
    for (const store of [this.#status.store, this.#sandboxes.store]) {
      for (const problem of store.problems) {
        if (problem.quarantinedTo) this.log.error("bad record moved to quarantine", { ...problem });
      }
    }
  }

  #logReadOnly() {
    const why = this.readOnly;
    if (why === undefined || why === this.#saidReadOnly) return;
    this.#saidReadOnly = why;
    this.log.error(
      "state dir cannot be written: records are served read-only, kept in memory, and written " +
        "once it can be (tried every pass)",
      { stateDir: this.stateDir, error: why },
    );
  }
}
