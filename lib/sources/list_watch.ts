/**
 * A collection of the API server kept in memory as client-go's reflector keeps it: one list, then
 * a watch from the list's resourceVersion; a watch the server ends (its timeout) is resumed from
 * the last version heard, at once; a watch that fails is resumed once at once, then the
 * collection is listed again with a capped back-off; `410 Gone` (the version is too old) lists
 * again; a watch silent past its timeout plus a margin is broken; and a full list every
 * `resyncMs` is the safety net against anything missed.
 *
 * A failed watch tells `lost` at once, before it is resumed: what follows a failure (a resume,
 * then lists with back-off) may take long, while a pass that asks the server itself costs
 * little; if the resume succeeds, `back` follows.
 *
 * The items are given out only while they can be vouched for: listed, and the watch open (or
 * being resumed after the server ended it cleanly). Otherwise `items()` says undefined, and the
 * caller must ask the API server itself: a cache that cannot follow the server must never be
 * taken for the server's answer.
 */
import type { SourceFailure, SourceResult } from "./types.ts";
import type { Watch, WatchEvent, WatchHandlers } from "./watch_stream.ts";

export interface Listed<T> {
  items: T[];
  resourceVersion: string;
}

export interface ListWatchOptions<T> {
  /** Lists the collection (a plain GET: a quorum read). */
  list(): Promise<SourceResult<Listed<T>>>;
  /**
   * What the collection held at `resourceVersion`, known otherwise (a GET of its one object):
   * the first watch starts from there, without a list. A watch from a version delivers every
   * change after it, so the items need only be what the collection held at some version not
   * older than this one; a version the server no longer keeps (410) lists, as ever.
   */
  seed?: Listed<T>;
  /** Watches the collection from `resourceVersion`, for `timeoutSeconds`, with bookmarks. */
  watch(resourceVersion: string, timeoutSeconds: number, on: WatchHandlers): Watch;
  /** An object of an event as an item; undefined when it is not one. */
  item(object: Record<string, unknown>): T | undefined;
  key(item: T): string;
  /** The timeout asked for each watch; a new watch picks again (client-go: 5 to 10 min). */
  timeoutSeconds(): number;
  /** How long past its timeout a watch that has not ended is taken for broken. */
  silenceMarginMs: number;
  /** A full list this often; unset: only when the watch cannot be resumed. */
  resyncMs?: number;
  /**
   * A watch open this long before it failed worked, as one that delivered an event: the failure
   * starts the back-off afresh, so that a quiet watch (nothing between bookmarks) does not add
   * each outage's failures to the last. Unset: only an event counts. Each watch with it set may
   * be resumed once per this long however the server fails it: for a few watches, not thousands.
   */
  workedAfterMs?: number;
  /** After a 403 or 405 (watches refused), the next try this much later. */
  retryRefusedMs: number;
  /**
   * What another watch of the same server (the pods') says of it: `lost`, a promise while the
   * server is known to be unreachable (resolved once it is back), and `outages`, how many times
   * it was lost so far. Before a watch or list is tried again after a failure, it waits for
   * `lost` besides its back-off: thousands of watches that fail together (the server gone) then
   * try again together once, when it is back, instead of each on its own back-off meanwhile. A
   * watch whose failures an outage explains (it waited for one, or one came and went during its
   * back-off) is then resumed from its version, as after a first failure, however many outages
   * it went through without an event. Unset: the back-off alone.
   */
  server?(): { lost?: Promise<void>; outages: number };
  /** The first retry after a failure (the back-off's first step); default at once. */
  firstRetryMs?(): number;
  /** A watch was taken for broken because it stayed silent past its timeout: the connection
   *  under it may be dead without having said so. */
  silent?(): void;
  /** The items changed (an event added, changed or deleted one, or a list differed). */
  changed(): void;
  /** The server could not be followed (`lost`: a watch failed, or a list failed), or could be
   *  again (`back`: a watch is open). */
  reachability?(state: "lost" | "back", failure?: SourceFailure): void;
}

type WatchEnd =
  | { kind: "ended" }
  | { kind: "resync" }
  | { kind: "expired" }
  /** `worked`: the watch gave an event, or stayed open `workedAfterMs`, before it failed: its
   *  failure is a first one, not one more of a server that cannot be watched. */
  | { kind: "failed"; failure: SourceFailure; worked: boolean };

/** A watch that ends sooner than this with no event is a failed one. */
const VERY_SHORT_WATCH_MS = 1_000;

function veryShort(timeoutSeconds: number): SourceFailure {
  return {
    source: "apiserver",
    kind: "bad-response",
    message: `watch asked for ${timeoutSeconds} s ended at once with no event`,
    problem: "very short watch",
  };
}

/** The first retry is at once; then 250 ms, doubling, at most 30 s. */
export function backoffMs(failures: number): number {
  return failures <= 1 ? 0 : Math.min(30_000, 250 * 2 ** (failures - 2));
}

/** 403 (not allowed to watch) or 405 (a server or proxy that does not watch). */
function isRefusal(failure: SourceFailure): boolean {
  return failure.kind === "forbidden" || failure.status === 405;
}

/** An object's metadata.resourceVersion, if it has one. */
export function versionOf(object: Record<string, unknown>): string | undefined {
  const version = (object.metadata as { resourceVersion?: unknown } | undefined)?.resourceVersion;
  return typeof version === "string" && version !== "" ? version : undefined;
}

/**
 * Whether two items differ as JSON. JSON.stringify recurses on some shapes (numeric keys) and
 * fails a few thousand levels down: an item it cannot write out counts as changed, never as a
 * throw out of the watch's loop (tests/sources/apiserver_watch_test.ts).
 */
function differs(a: unknown, b: unknown): boolean {
  try {
    return JSON.stringify(a) !== JSON.stringify(b);
  } catch {
    return true;
  }
}

export class ListWatch<T> {
  readonly #opts: ListWatchOptions<T>;
  readonly #items = new Map<string, T>();
  #version = "";
  #usable = false;
  #listed = false;
  #lost = false;
  #stopped = false;
  #watch: Watch | undefined;
  /** Ends the current wait (a back-off, or a watch under way) early. */
  #interrupt: (() => void) | undefined;

  constructor(opts: ListWatchOptions<T>) {
    this.#opts = opts;
    void this.#run();
  }

  /** The items, while listed and followed; undefined when only the server can tell. */
  items(): T[] | undefined {
    return this.#usable ? [...this.#items.values()] : undefined;
  }

  /** The last version heard from the server (a list's, an event's, a bookmark's), in sync or
   *  not; undefined before any. */
  version(): string | undefined {
    return this.#version === "" ? undefined : this.#version;
  }

  /** One item by key, on the same terms; null: followed, and there is none. */
  item(key: string): T | null | undefined {
    return this.#usable ? this.#items.get(key) ?? null : undefined;
  }

  /** Ends the watch under way, or the wait for the next, to watch again at once from the last
   *  version: on another connection, when the one it used may be dead. */
  rewatch(): void {
    this.#interrupt?.();
  }

  close(): void {
    this.#stopped = true;
    this.#usable = false;
    this.#watch?.close();
    this.#interrupt?.();
  }

  #wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.#interrupt = done;
    });
  }

  #setUsable(usable: boolean, failure?: SourceFailure) {
    this.#usable = usable;
    if (usable && this.#lost) {
      this.#lost = false;
      this.#opts.reachability?.("back");
    } else if (!usable && failure && !this.#lost) {
      this.#lost = true;
      this.#opts.reachability?.("lost", failure);
    }
  }

  async #run() {
    let failures = 0;
    /** How many outages the server had told when this series of failures began. */
    let outagesBefore: number | undefined;
    let mustList = true;
    let listedAt = 0;
    const seed = this.#opts.seed;
    if (seed) {
      this.#replace(seed.items);
      this.#version = seed.resourceVersion;
      listedAt = Date.now();
      mustList = false;
    }
    while (!this.#stopped) {
      if (mustList) {
        const listed = await this.#opts.list();
        if (this.#stopped) return;
        if (!listed.ok) {
          failures++;
          if (isRefusal(listed.failure)) {
            await this.#refusal();
          } else {
            this.#setUsable(false, listed.failure);
            await this.#retryWait(Math.max(failures, 2));
          }
          continue;
        }
        this.#replace(listed.value.items);
        this.#version = listed.value.resourceVersion;
        listedAt = Date.now();
        mustList = false;
      }
      const end = await this.#watchOnce(listedAt);
      if (this.#stopped) return;
      switch (end.kind) {
        case "ended":
          failures = 0;
          break;
        case "resync":
          mustList = true;
          break;
        case "expired":
          // Listed again at once; again and again (a server that expires every version) only
          // after a back-off.
          this.#usable = false;
          mustList = true;
          failures++;
          await this.#wait(backoffMs(failures));
          break;
        case "failed":
          if (isRefusal(end.failure)) {
            await this.#refusal();
            mustList = true;
            break;
          }
          // Counted afresh after a watch that worked: otherwise a quiet watch (no event between
          // bookmarks) would add every outage's failures to the last, and the back-off after
          // the fifth would hold the return of the server many seconds.
          failures = end.worked ? 1 : failures + 1;
          if (failures === 1) outagesBefore = this.#opts.server?.().outages;
          // Resumed once at once; a watch that cannot be resumed is a server that cannot be
          // followed until a list succeeds again.
          this.#setUsable(false, end.failure);
          if (failures > 1) mustList = true;
          if (await this.#retryWait(failures, outagesBefore)) {
            // It failed because the server was gone, which says nothing of this watch: resumed
            // from its version, as after a first failure (client-go's reflector, too, watches
            // again after a refused connection rather than list). Otherwise every quiet watch
            // would list after each outage but the first, thousands of lists at each return.
            failures = 1;
            outagesBefore = this.#opts.server?.().outages;
            mustList = false;
          }
      }
    }
  }

  /**
   * The wait before the next try after `failures` failures in a row: the back-off, and then the
   * server's return if it is known to be unreachable. True when an outage explains the failures:
   * it waited for the return, or the server was lost since `outagesBefore` (an outage shorter
   * than the back-off, over before it ended).
   */
  async #retryWait(failures: number, outagesBefore?: number): Promise<boolean> {
    const first = this.#opts.firstRetryMs;
    await this.#wait(failures <= 1 && first ? first() : backoffMs(failures));
    const server = this.#opts.server?.();
    if (!server || this.#stopped) return false;
    if (server.lost === undefined) {
      return outagesBefore !== undefined && server.outages !== outagesBefore;
    }
    await this.#until(server.lost);
    return true;
  }

  /** Waits for `promise`, or until interrupted (closed, or asked to watch again). */
  #until(promise: Promise<void>): Promise<void> {
    return new Promise((resolve) => {
      this.#interrupt = resolve;
      void promise.then(() => resolve());
    });
  }

  /** Watches refused (403, 405): the caller asks with plain requests until the next try. */
  async #refusal() {
    this.#usable = false;
    await this.#wait(this.#opts.retryRefusedMs);
  }

  /** The items of a list; a change from the last list or watch is told, the first list not. */
  #replace(items: T[]) {
    const before = this.#items.size;
    let changed = false;
    const next = new Map(items.map((item) => [this.#opts.key(item), item]));
    for (const [key, item] of next) {
      const old = this.#items.get(key);
      if (old === undefined || differs(old, item)) changed = true;
    }
    if (next.size !== before) changed = true;
    this.#items.clear();
    for (const [key, item] of next) this.#items.set(key, item);
    if (changed && this.#listed) this.#opts.changed();
    this.#listed = true;
  }

  /** One watch, from the last version, until it ends one way or another. */
  #watchOnce(listedAt: number): Promise<WatchEnd> {
    const opts = this.#opts;
    const timeoutSeconds = opts.timeoutSeconds();
    const startedAt = Date.now();
    return new Promise((resolve) => {
      let delivered = false;
      let openedAt: number | undefined;
      const worked = () =>
        delivered ||
        (openedAt !== undefined && opts.workedAfterMs !== undefined &&
          Date.now() - openedAt >= opts.workedAfterMs);
      let over = false;
      const end = (how: WatchEnd) => {
        if (over) return;
        over = true;
        clearTimeout(silence);
        clearTimeout(resync);
        this.#interrupt = undefined;
        this.#watch?.close();
        this.#watch = undefined;
        resolve(how);
      };
      const silence = setTimeout(() => {
        end({
          kind: "failed",
          worked: false,
          failure: {
            source: "apiserver",
            kind: "timeout",
            message: `watch open past its ${timeoutSeconds} s timeout: taken for broken`,
            problem: "watch silent past its timeout",
          },
        });
        opts.silent?.();
      }, timeoutSeconds * 1000 + opts.silenceMarginMs);
      const resync = opts.resyncMs === undefined ? undefined : setTimeout(
        () => end({ kind: "resync" }),
        Math.max(0, listedAt + opts.resyncMs - Date.now()),
      );
      this.#interrupt = () => end({ kind: "ended" });
      const onEvent = (event: WatchEvent) => {
        if (over) return;
        const failure = this.#apply(event);
        if (failure === "expired") end({ kind: "expired" });
        else if (failure) end({ kind: "failed", failure, worked: worked() });
        else delivered = true;
      };
      this.#watch = opts.watch(this.#version, timeoutSeconds, {
        opened: () => {
          openedAt = Date.now();
          this.#setUsable(true);
        },
        event: onEvent,
        ended: (failure) => {
          // 410 as the answer's status (as older servers send it) is an ERROR event's 410.
          if (failure?.status === 410) return end({ kind: "expired" });
          if (failure) return end({ kind: "failed", failure, worked: worked() });
          // As client-go: a watch ended at once with nothing in it is no watch, or a server (or
          // something in front of it) that ends every watch would be asked again and again.
          if (!delivered && Date.now() - startedAt < VERY_SHORT_WATCH_MS) {
            return end({ kind: "failed", failure: veryShort(timeoutSeconds), worked: false });
          }
          end({ kind: "ended" });
        },
      });
    });
  }

  /** Applies one event; says why the watch must end, if it must. */
  #apply(event: WatchEvent): SourceFailure | "expired" | undefined {
    const { object } = event;
    if (event.type === "ERROR") {
      const status = object as { code?: unknown; reason?: unknown; message?: unknown };
      if (status.code === 410 || status.reason === "Expired" || status.reason === "Gone") {
        return "expired";
      }
      const code = typeof status.code === "number" ? status.code : undefined;
      return {
        source: "apiserver",
        kind: code !== undefined && code >= 500 ? "server-error" : "bad-response",
        message: `watch ended by the server: ${String(status.message ?? "an ERROR event")}`,
        ...(code !== undefined ? { status: code } : {}),
        problem: "watch ERROR event",
      };
    }
    const version = versionOf(object);
    if (event.type === "BOOKMARK") {
      if (version !== undefined) this.#version = version;
      return undefined;
    }
    const item = this.#opts.item(object);
    if (item === undefined || version === undefined) {
      return {
        source: "apiserver",
        kind: "bad-response",
        message: `watch event ${event.type}: not an object of the collection watched`,
        problem: "unexpected watch event",
      };
    }
    const key = this.#opts.key(item);
    if (event.type === "DELETED") this.#items.delete(key);
    else this.#items.set(key, item);
    this.#version = version;
    this.#opts.changed();
    return undefined;
  }
}
