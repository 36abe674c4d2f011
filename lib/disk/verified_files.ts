/**
 * Files the agent has checked or parsed, remembered so that a later pass can skip reading them
 * again. Steady passes over 1,000 checkpoints spent a third of their time re-making and
 * re-reading manifests that had not changed (docs/benchmarks.md, "Node pass").
 *
 * A file stays trusted while (l)stat shows the same inode, size, mode, owner, mtime and ctime as
 * at the check. Every write, rename over, chmod, chown or touch sets ctime to the
 * current time, which no one can set back; but the kernel's clock for it is coarse, so a write in
 * the same tick as the check would go unseen. A file is therefore only remembered when its ctime
 * was already older than TRUSTED_AGE_MS at the check (git's "racily clean" rule): a file written
 * just now is read back once more on the next pass.
 */
import { createHash } from "node:crypto";
import { join } from "node:path";

/** What a TreeStamp holds for a root that did not exist. */
const ABSENT = "absent";

/**
 * Far coarser than any file system's timestamp granularity, and than Deno's: it reports ctime in
 * whole seconds, so a ctime of second S stands for a change anywhere in [S, S + 1 s), and the
 * kernel's coarse clock may still be in S a moment after Date.now() has passed it. Two seconds
 * after S the change is at least a second old; with one, a write just after the check could keep
 * the same ctime (seen: a file rewritten with its mtime set back went unseen under load).
 */
export const TRUSTED_AGE_MS = 2_000;

/**
 * What changes whenever an entry's content, mode or owner could have: device and inode (a
 * replacement), size, mode, owner, mtime and ctime (every write, rename over, chmod or chown).
 */
export function statIdentity(info: Deno.FileInfo): string {
  return [
    info.dev,
    info.ino,
    info.size,
    info.mode,
    info.uid,
    info.gid,
    info.mtime?.getTime(),
    info.ctime?.getTime(),
  ].join(" ");
}

/** A regular file's identity; undefined when it has none to trust. */
function identity(info: Deno.FileInfo): string | undefined {
  if (!info.isFile || info.mtime === null || info.ctime === null) return undefined;
  return statIdentity(info);
}

/** The identity of a file that may be remembered: one last changed long enough ago. */
export function settledIdentity(info: Deno.FileInfo, now: number): string | undefined {
  const id = identity(info);
  return id !== undefined && info.ctime!.getTime() <= now - TRUSTED_AGE_MS ? id : undefined;
}

/**
 * Synchronous on purpose: a steady pass over 1,000 checkpoints makes thousands of these calls,
 * and each asynchronous one is a round trip through a thread of Deno's blocking pool. Done in
 * place, the steady pass at 1,000 parents took a fifth less time (docs/benchmarks.md); an lstat
 * of a local file costs microseconds.
 */
export function lstatOrUndefined(path: string): Deno.FileInfo | undefined {
  try {
    return Deno.lstatSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
}

/**
 * What a file was checked against: a string, parts (an owner and a file's bytes), or the digest
 * of either, made by contentDigest (a whole parent as JSON, digested once a pass); of which only
 * equality counts.
 */
export type ContentKey = string | readonly (string | Uint8Array)[] | { readonly digest: string };

/** A key's SHA-256; each part is preceded by its length, so that no two lists of parts collide. */
export function contentDigest(key: ContentKey): string {
  if (typeof key === "object" && "digest" in key) return key.digest;
  const hash = createHash("sha256");
  if (typeof key === "string") hash.update(key);
  else for (const part of key) hash.update(`${part.length}:`).update(part);
  return hash.digest("base64");
}

export class VerifiedFiles {
  /** path → the digest of what the content was checked against, and the file's identity then. */
  readonly #entries = new Map<string, { key: string; identity: string }>();
  readonly #now: () => number;

  /** `now`: wall-clock milliseconds, as the kernel stamps ctime. */
  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /**
   * True when `path` was checked to hold the content `key` stands for and has not changed since;
   * false means: check it the long way.
   */
  unchanged(path: string, key: ContentKey): boolean {
    const entry = this.#entries.get(path);
    if (!entry || entry.key !== contentDigest(key)) return false;
    const info = lstatOrUndefined(path);
    return info !== undefined && identity(info) === entry.identity;
  }

  /**
   * True when `path` was checked to hold the content `key` stands for, and remembered: whether
   * it still does is for the caller to know otherwise (a watch of its directory).
   */
  held(path: string, key: ContentKey): boolean {
    return this.#entries.get(path)?.key === contentDigest(key);
  }

  /** Call right after `path` was written with, or found to hold, the content `key` stands for. */
  checked(path: string, key: ContentKey): void {
    this.#entries.delete(path);
    const info = lstatOrUndefined(path);
    const id = info && settledIdentity(info, this.#now());
    if (id !== undefined) this.#entries.set(path, { key: contentDigest(key), identity: id });
  }

  /** Forgets every path but those in `keep`. */
  retain(keep: ReadonlySet<string>): void {
    for (const path of this.#entries.keys()) if (!keep.has(path)) this.#entries.delete(path);
  }
}

/**
 * Some directory trees as lstat showed every entry of them, each root included, at a moment when
 * none had changed for TRUSTED_AGE_MS. While each entry still shows the same stat, nothing in the
 * trees has changed: a file written, chmodded, chowned, replaced or removed changes its own stat,
 * and an entry added, removed or renamed changes its directory's mtime and ctime. A root absent
 * then must still be absent.
 */
export class TreeStamp {
  readonly #entries: ReadonlyMap<string, string>;

  private constructor(entries: ReadonlyMap<string, string>) {
    this.#entries = entries;
  }

  /**
   * The trees under `roots` as they are now; undefined when one of their entries changed less
   * than TRUSTED_AGE_MS before `now` (wall-clock milliseconds), or could not be looked at.
   */
  static take(roots: readonly string[], now: number): TreeStamp | undefined {
    const entries = new Map<string, string>();
    const walk = (path: string): boolean => {
      const info = Deno.lstatSync(path);
      if (info.ctime === null || info.ctime.getTime() > now - TRUSTED_AGE_MS) return false;
      entries.set(path, statIdentity(info));
      if (!info.isDirectory) return true;
      for (const entry of Deno.readDirSync(path)) {
        if (!walk(join(path, entry.name))) return false;
      }
      return true;
    };
    try {
      for (const root of roots) {
        if (lstatOrUndefined(root) === undefined) entries.set(root, ABSENT);
        else if (!walk(root)) return undefined;
      }
    } catch {
      // Changed while it was walked (an entry gone), or unreadable: nothing to trust.
      return undefined;
    }
    return new TreeStamp(entries);
  }

  /** True when every entry shows the stat it had, and every absent root is still absent. */
  unchanged(): boolean {
    try {
      for (const [path, id] of this.#entries) {
        const info = lstatOrUndefined(path);
        if ((info === undefined ? ABSENT : statIdentity(info)) !== id) return false;
      }
    } catch {
      return false;
    }
    return true;
  }
}

/** What was parsed from files, reused while a file's stat (given by the caller) is unchanged. */
export class ParsedFiles<T> {
  readonly #entries = new Map<string, { identity: string; value: T }>();
  readonly #now: () => number;

  /** `now`: wall-clock milliseconds, as the kernel stamps ctime. */
  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** What was parsed from `path` when it looked as `info` says, if anything. */
  get(path: string, info: Deno.FileInfo): T | undefined {
    const entry = this.#entries.get(path);
    return entry && entry.identity === identity(info) ? entry.value : undefined;
  }

  /** `value` was parsed from `path`, read after a stat that returned `info`. */
  set(path: string, info: Deno.FileInfo, value: T): void {
    const id = settledIdentity(info, this.#now());
    if (id === undefined) this.#entries.delete(path);
    else this.#entries.set(path, { identity: id, value });
  }

  /** Forgets every path but those in `keep`. */
  retain(keep: ReadonlySet<string>): void {
    for (const path of this.#entries.keys()) if (!keep.has(path)) this.#entries.delete(path);
  }
}
