/**
 * One agent per node (docs/design.md#lock): an exclusive flock(2) on the lock file. The kernel
 * drops the lock when the holder's process ends however it ends, so a file left by a crash never
 * blocks a restart; the pid written into the file is only there to say who holds it.
 *
 * Activation comes before the guarantee: a pid that cannot be written (a full or failing disk)
 * is only said, and a lock file that cannot even be created (a read-only /run/lock) leaves the
 * agent running without the lock rather than not running at all. An existing lock file on a
 * read-only mount is still locked: flock needs no write access.
 */
import { dirname } from "node:path";

export interface Lock {
  path: string;
  /**
   * False when the lock file could be neither created nor opened: the agent runs without the
   * single-agent guarantee, and `problem` says why.
   */
  held: boolean;
  /** What went wrong: the pid could not be written, or no lock could be taken. */
  problem?: string;
  /** Empties the pid (when it could be written) and drops the lock; never throws. The file
   * stays: deleting it would let a second agent lock a new file while a third still holds the
   * old, unlinked one. */
  release(): Promise<void>;
}

/** Another process holds the lock; `heldBy` is its pid when it has written one. */
export interface LockHeld {
  heldBy?: number;
}

export function isLock(result: Lock | LockHeld): result is Lock {
  return "release" in result;
}

async function readPid(path: string): Promise<number | undefined> {
  const text = await Deno.readTextFile(path).catch(() => "");
  return /^\d+\n?$/.test(text) ? Number(text) : undefined;
}

async function sameFile(file: Deno.FsFile, path: string): Promise<boolean> {
  const [held, named] = await Promise.all([file.stat(), Deno.stat(path).catch(() => undefined)]);
  return named !== undefined && held.dev === named.dev && held.ino === named.ino;
}

/** Bounds the retries when the file is replaced between open and lock (someone deleted it). */
const ATTEMPTS = 3;

interface Opened {
  file: Deno.FsFile;
  /** Why the file is open read-only (it could not be opened for writing); the pid is not written. */
  readOnly?: string;
}

/** Opens the lock file for writing, creating it, or else an existing one read-only. */
async function openLockFile(path: string): Promise<Opened | { error: string }> {
  try {
    await Deno.mkdir(dirname(path), { recursive: true });
  } catch (e) {
    return { error: (e as Error).message };
  }
  try {
    return { file: await Deno.open(path, { read: true, write: true, create: true, mode: 0o644 }) };
  } catch (writable) {
    try {
      return { file: await Deno.open(path, { read: true }), readOnly: (writable as Error).message };
    } catch {
      return { error: (writable as Error).message };
    }
  }
}

/** Replaces the file's content with our pid; why it could not, or undefined. */
async function writePid(file: Deno.FsFile): Promise<string | undefined> {
  try {
    await file.truncate(0);
    const pid = new TextEncoder().encode(`${Deno.pid}\n`);
    for (let written = 0; written < pid.length;) {
      written += await file.write(pid.subarray(written));
    }
    return undefined;
  } catch (e) {
    return `the pid could not be written: ${(e as Error).message}`;
  }
}

/**
 * Takes the lock without waiting, or says who holds it. When no lock can be taken at all, the
 * result is a Lock with `held: false`.
 */
export async function acquireLock(path: string): Promise<Lock | LockHeld> {
  for (let attempt = 1;; attempt++) {
    const opened = await openLockFile(path);
    if ("error" in opened) {
      return {
        path,
        held: false,
        problem: `no lock taken: the lock file cannot be created: ${opened.error}`,
        release: () => Promise.resolve(),
      };
    }
    const { file, readOnly } = opened;
    let locked = false;
    try {
      if (!await file.tryLock(true)) return { heldBy: await readPid(path) };
      // A lock on a file no longer at `path` keeps nobody out: lock the current one instead.
      if (!await sameFile(file, path)) {
        if (attempt < ATTEMPTS) continue;
        throw new Error(`lock file ${path} keeps being replaced`);
      }
      const problem = readOnly === undefined
        ? await writePid(file)
        : `the pid could not be written: the file opens only read-only: ${readOnly}`;
      locked = true;
      return {
        path,
        held: true,
        ...(problem ? { problem } : {}),
        async release() {
          try {
            if (problem === undefined) await file.truncate(0);
          } catch {
            // The pid is only informational; the lock goes with the descriptor below.
          } finally {
            file.close();
          }
        },
      };
    } finally {
      if (!locked) file.close();
    }
  }
}
