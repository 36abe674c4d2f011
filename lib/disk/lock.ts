/**
 * One agent per node (docs/design.md#lock): an exclusive flock(2) on the lock file. The kernel
 * drops the lock when the holder's process ends however it ends, so a file left by a crash never
 * blocks a restart; the pid written into the file is only there to say who holds it.
 *
 * Only root may be able to hold or change the lock. flock needs nothing but an open descriptor,
 * read-only will do: anyone who can open the file can hold its lock and keep every agent out,
 * restart after restart; and a link or file someone else placed at the path would have the agent
 * truncate and write wherever it leads. So the lock lives in a directory only root can write
 * (by default the unit's RuntimeDirectory, /run/ckpt-agent, which the agent makes 0700 when it
 * is missing: after a reboot, or for an operator's `--once` with the unit stopped), and a
 * directory or file anyone else could have placed, changed or opened is not used. Its word that
 * another agent holds the lock could be a local user's.
 *
 * Activation comes before the guarantee: a lock that cannot be trusted, or a lock file that
 * cannot even be created (a read-only mount), leaves the agent running without the lock rather
 * than not running at all, and a pid that cannot be written (a full or failing disk) is only
 * said. An existing lock file on a read-only mount is still locked: flock needs no write access.
 */
import { dirname } from "node:path";
import { octalMode } from "../core/checkpoint_layout.ts";

export interface Lock {
  path: string;
  /**
   * False when no lock could be taken (the lock file could be neither created nor opened, or
   * someone other than root could hold or change it): the agent runs without the single-agent
   * guarantee, and `problem` says why.
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

/** The lock directory the agent makes; the lock file's mode when the agent creates it. */
const LOCK_DIR_MODE = 0o700;
const LOCK_FILE_MODE = 0o600;

/** Write bits of group and others: whoever has them can place, replace or remove entries. */
const OTHERS_WRITE = 0o022;

/**
 * Why a lock directory (its lstat) is not root's alone, or undefined when it is. Searchable by
 * others is allowed: the lock file's own mode then decides who can open it (lockFileDistrust).
 */
export function lockDirDistrust(dir: Deno.FileInfo): string | undefined {
  if (dir.isSymlink) return "is a symlink";
  if (!dir.isDirectory) return "is not a directory";
  if (dir.uid !== 0) return `is owned by uid ${dir.uid}, not root`;
  const mode = dir.mode! & 0o7777;
  if ((mode & OTHERS_WRITE) !== 0) {
    return `is writable by group or others (mode ${octalMode(mode)})`;
  }
  return undefined;
}

/**
 * Why an existing lock file (its lstat, in the trusted directory `dir`) is not root's alone, or
 * undefined when it is: root made it, it has no other name, and nobody else can open it.
 */
export function lockFileDistrust(file: Deno.FileInfo, dir: Deno.FileInfo): string | undefined {
  if (file.isSymlink) return "is a symlink";
  if (!file.isFile) return "is not a regular file";
  if (file.uid !== 0) return `is owned by uid ${file.uid}, not root`;
  // A second name may be in a directory others can enter.
  if (file.nlink !== 1) return `has ${file.nlink} links`;
  const [fileMode, dirMode] = [file.mode! & 0o7777, dir.mode! & 0o7777];
  if ((dirMode & 0o011) !== 0 && (fileMode & 0o066) !== 0) {
    return `can be opened by group or others (mode ${octalMode(fileMode)}) in a directory they ` +
      `can enter (mode ${octalMode(dirMode)})`;
  }
  return undefined;
}

/** The problem of a lock that someone other than root could hold or change. */
function untrusted(what: string, path: string, why: string): string {
  return `no lock taken: the ${what} ${path} ${why}, so someone other than root could hold or ` +
    "change the lock";
}

function cannotCreate(e: unknown): string {
  return `no lock taken: the lock file cannot be created: ${(e as Error).message}`;
}

/** No lock could be taken: the agent goes on without one. */
function noLock(path: string, problem: string): Lock {
  return { path, held: false, problem, release: () => Promise.resolve() };
}

function sameFile(a: Deno.FileInfo, b: Deno.FileInfo | undefined): boolean {
  return b !== undefined && a.dev === b.dev && a.ino === b.ino;
}

/** The lock directory, made 0700 when missing, if only root can write it; else the problem. */
async function trustedDir(dir: string): Promise<Deno.FileInfo | string> {
  let made: unknown;
  try {
    // Intermediate directories too, for a lockFile in a directory not made yet.
    await Deno.mkdir(dir, { recursive: true, mode: LOCK_DIR_MODE });
  } catch (e) {
    made = e; // Said only if nothing is there to use.
  }
  let info: Deno.FileInfo;
  try {
    // lstat: a symlink is refused, not followed.
    info = await Deno.lstat(dir);
  } catch (e) {
    return cannotCreate(made ?? e);
  }
  const why = lockDirDistrust(info);
  return why === undefined ? info : untrusted("lock directory", dir, why);
}

interface Opened {
  file: Deno.FsFile;
  /** Why the file is open read-only (it could not be opened for writing); the pid is not written. */
  readOnly?: string;
}

/** An existing lock file, for writing, or else read-only. */
async function openExisting(path: string): Promise<Opened | string> {
  try {
    return { file: await Deno.open(path, { read: true, write: true }) };
  } catch (writable) {
    try {
      return { file: await Deno.open(path, { read: true }), readOnly: (writable as Error).message };
    } catch {
      return cannotCreate(writable);
    }
  }
}

/**
 * Opens the lock file in the trusted directory, creating it when missing. A string is the
 * problem; undefined means it was created or replaced meanwhile: try again.
 */
async function openLockFile(
  path: string,
  dir: Deno.FileInfo,
): Promise<Opened | string | undefined> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.lstat(path);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) return cannotCreate(e);
    try {
      // O_CREAT|O_EXCL follows no link: what it opens is a file it just made.
      const file = await Deno.open(path, {
        read: true,
        write: true,
        createNew: true,
        mode: LOCK_FILE_MODE,
      });
      return { file };
    } catch (e) {
      return e instanceof Deno.errors.AlreadyExists ? undefined : cannotCreate(e);
    }
  }
  const why = lockFileDistrust(info, dir);
  if (why !== undefined) return untrusted("lock file", path, why);
  const opened = await openExisting(path);
  if (typeof opened === "string") return opened;
  // Deno.open has no O_NOFOLLOW: what it opened must be the file just examined. In a directory
  // only root can write nobody else can swap it in between; root (another agent) may have.
  if (sameFile(info, await opened.file.stat())) return opened;
  opened.file.close();
  return undefined;
}

/** The holder's pid, read through the descriptor: the path is not followed again. */
async function readPid(file: Deno.FsFile): Promise<number | undefined> {
  const buffer = new Uint8Array(32);
  const read = await file.read(buffer).catch(() => null);
  const text = new TextDecoder().decode(buffer.subarray(0, read ?? 0));
  return /^\d+\n?$/.test(text) ? Number(text) : undefined;
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

/** Bounds the retries when the file is created or replaced meanwhile (someone deleted it). */
const ATTEMPTS = 3;

/**
 * Takes the lock without waiting, or says who holds it. When no lock can be taken at all, the
 * result is a Lock with `held: false`.
 */
export async function acquireLock(path: string): Promise<Lock | LockHeld> {
  const dir = await trustedDir(dirname(path));
  if (typeof dir === "string") return noLock(path, dir);
  for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
    const opened = await openLockFile(path, dir);
    if (opened === undefined) continue;
    if (typeof opened === "string") return noLock(path, opened);
    const { file, readOnly } = opened;
    let locked = false;
    try {
      if (!await file.tryLock(true)) return { heldBy: await readPid(file) };
      // A lock on a file no longer at `path` keeps nobody out: lock the current one instead.
      if (!sameFile(await file.stat(), await Deno.lstat(path).catch(() => undefined))) continue;
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
  return noLock(path, `no lock taken: the lock file ${path} keeps being replaced`);
}
