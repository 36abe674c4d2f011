/**
 * One agent per node (DESIGN §6): an exclusive flock(2) on the lock file. The kernel drops the
 * lock when the holder's process ends however it ends, so a file left by a crash never blocks a
 * restart; the pid written into the file is only there to say who holds it.
 */
import { dirname } from "node:path";

export interface Lock {
  path: string;
  /** Empties the pid and drops the lock. The file stays: deleting it would let a second agent
   * lock a new file while a third still holds the old, unlinked one. */
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

/** Takes the lock without waiting, or says who holds it. */
export async function acquireLock(path: string): Promise<Lock | LockHeld> {
  await Deno.mkdir(dirname(path), { recursive: true });
  for (let attempt = 1;; attempt++) {
    const file = await Deno.open(path, { read: true, write: true, create: true, mode: 0o644 });
    let locked = false;
    try {
      if (!await file.tryLock(true)) return { heldBy: await readPid(path) };
      // A lock on a file no longer at `path` keeps nobody out: lock the current one instead.
      if (!await sameFile(file, path)) {
        if (attempt < ATTEMPTS) continue;
        throw new Error(`lock file ${path} keeps being replaced`);
      }
      await file.truncate(0);
      const pid = new TextEncoder().encode(`${Deno.pid}\n`);
      for (let written = 0; written < pid.length;) {
        written += await file.write(pid.subarray(written));
      }
      locked = true;
      return {
        path,
        async release() {
          try {
            await file.truncate(0);
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
