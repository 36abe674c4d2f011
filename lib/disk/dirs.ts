/**
 * Directories under the agent's trees: created with their final mode and made durable (the
 * parent fsynced), like every file written through atomic_write.ts, and below a configured
 * directory never reached through anything but directories of the agent's own (ownTree).
 */
import { dirname, isAbsolute, join, normalize, resolve } from "node:path";
import { DIR_MODE, type FileAccess, octalMode } from "../core/checkpoint_layout.ts";
import { type DirSync, removeDurably, syncDir, syncEntry } from "./atomic_write.ts";
import { lstatOrUndefined } from "./verified_files.ts";

/** Whether anything (a symlink counts as itself) is at `path`. */
export async function pathExists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}

async function existsAsDir(path: string): Promise<boolean> {
  try {
    const info = await Deno.stat(path);
    // As the kernel says it of a path through a file: readiness names the directory by it.
    if (!info.isDirectory) throw new Error(`Not a directory (os error 20): '${path}'`);
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}

/**
 * A new directory with exactly `mode`, made durable (its parent fsynced as `sync` says); when
 * that fails midway (a full or failing disk) it is removed again, so that the next pass makes it
 * whole rather than find one with the umask's mode, which ensureDir would keep.
 */
async function makeDir(path: string, mode: number, sync: DirSync): Promise<void> {
  await Deno.mkdir(path, { mode });
  try {
    // mkdir's mode is filtered by the umask; the final mode is exact.
    await Deno.chmod(path, mode);
    await syncEntry(path, sync);
  } catch (e) {
    await Deno.remove(path).catch(() => {});
    throw e;
  }
}

/**
 * Creates `path` and its missing parents with `mode`. Existing directories are left as they are,
 * whoever made them (a configured directory may be a symlink, or the kubelet's own 0755 one).
 * `sync`: who fsyncs the parent of each directory made (DirSync).
 */
export async function ensureDir(path: string, mode: number, sync: DirSync = true): Promise<void> {
  const missing: string[] = [];
  for (let dir = resolve(path); !await existsAsDir(dir); dir = dirname(dir)) {
    missing.push(dir);
    if (dirname(dir) === dir) break;
  }
  for (const dir of missing.reverse()) {
    try {
      await makeDir(dir, mode, sync);
    } catch (e) {
      if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
    }
  }
}

/**
 * The uid the agent runs as: root on a node. The directories of its trees are its own, and a
 * directory is trusted only when it belongs to the agent or to root.
 */
export function agentUid(): number {
  return uid ??= Deno.uid() ?? 0;
}

let uid: number | undefined;

const OTHERS_WRITE = 0o022;

/**
 * Whether no one but the agent (or root) can add, remove or rename an entry of the directory
 * lstat showed: then a path through it cannot be redirected under the agent.
 */
export function isTrustedDir(info: Deno.FileInfo): boolean {
  return info.isDirectory && (info.uid === 0 || info.uid === agentUid()) &&
    ((info.mode ?? OTHERS_WRITE) & OTHERS_WRITE) === 0;
}

/**
 * Gives a directory of the agent's trees back to the agent: first its owner (`access`, or the
 * agent keeping the group), so that no one else can change its mode or entries any more, then
 * its mode (`access`, or the mode it has without write bits for group and others). `info` is
 * its lstat, taken through a trusted parent, so the entry cannot have changed since.
 */
async function own(path: string, info: Deno.FileInfo, access?: FileAccess): Promise<void> {
  const mode = (info.mode ?? 0) & 0o7777;
  const want = access ?? { uid: agentUid(), gid: info.gid ?? 0, mode: mode & ~OTHERS_WRITE };
  if (info.uid !== want.uid || info.gid !== want.gid) await Deno.chown(path, want.uid, want.gid);
  if (mode !== want.mode) await Deno.chmod(path, want.mode);
}

/** What the error of a write below a configured directory others can write says. */
export const CHANGED_BY_OTHERS = "can be changed by others";

/** `root` must be a directory whose entries no one but the agent can change. */
function checkRoot(root: string): void {
  const info = Deno.statSync(root);
  if (!isTrustedDir(info)) {
    throw new Error(
      `'${root}' ${CHANGED_BY_OTHERS} (owner ${info.uid}, mode ${
        octalMode((info.mode ?? 0) & 0o7777)
      }): nothing is written below it`,
    );
  }
}

/** The names from `root` down to `path`; throws unless `path` is a plain path below `root`. */
function segmentsBelow(root: string, path: string): string[] {
  if (!isAbsolute(path) || normalize(path) !== path || !path.startsWith(`${root}/`)) {
    throw new Error(`${JSON.stringify(path)} is not a directory below ${root}`);
  }
  return path.slice(root.length + 1).split("/");
}

export interface OwnTreeOptions {
  /** Make the directories that are missing (the default); false: stop at the first. */
  create?: boolean;
  /** What the directories between `root` and `path` get; undefined: see own. */
  above?: FileAccess;
  /** Who fsyncs the parent of each directory made or entry removed (DirSync). */
  sync?: DirSync;
}

/**
 * Makes every directory below the configured directory `root` down to `path` a real directory
 * of the agent's that no one else can change (docs/design.md#no-links), walking down from
 * `root` with lstat: whatever is in the way and is no directory (a symbolic link, a file) is
 * removed, never followed; a missing directory is made; one that belongs to someone else or that
 * others may write is given back to the agent (own) before anything below it is looked at. Each
 * step is then through a directory no one else can change, so a swap cannot redirect the next
 * one. `path` gets `access`. `root` itself is as configured (it may be a symbolic link), made
 * when missing, and must not be writable by others. True when `path` is there; false when
 * `create` is false and it is not.
 */
export async function ownTree(
  root: string,
  path: string,
  access?: FileAccess,
  { create = true, above, sync = true }: OwnTreeOptions = {},
): Promise<boolean> {
  const names = segmentsBelow(root, path);
  if (create) await ensureDir(root, DIR_MODE, sync);
  else if (lstatOrUndefined(root) === undefined) return false;
  checkRoot(root);
  let at = root;
  for (const [i, name] of names.entries()) {
    at = join(at, name);
    const info = await ownDirEntry(at, i === names.length - 1 ? access : above, create, sync);
    if (info === undefined) return false;
  }
  return true;
}

/**
 * One step of ownTree: `path`, in a directory of the agent's, made a directory of the agent's
 * (`access`); its lstat then, or undefined when it is missing and not to be made.
 */
async function ownDirEntry(
  path: string,
  access: FileAccess | undefined,
  create: boolean,
  sync: DirSync,
): Promise<Deno.FileInfo | undefined> {
  // Another write of this process may make the same directory at the same moment (two
  // checkpoints of one namespace): what it made is taken as found.
  for (let attempt = 1;; attempt++) {
    let info = lstatOrUndefined(path);
    if (info !== undefined && !info.isDirectory) {
      await removeDurably(path, sync);
      info = undefined;
    }
    if (info === undefined) {
      if (!create) return undefined;
      try {
        await makeDir(path, access?.mode ?? DIR_MODE, sync);
      } catch (e) {
        if (e instanceof Deno.errors.AlreadyExists && attempt < 3) continue;
        throw e;
      }
      info = Deno.lstatSync(path);
    }
    await own(path, info, access);
    return info;
  }
}

/**
 * What is at `path`, below the configured directory `root`, seen without changing anything:
 * "own" when every directory from `root` down to it is a real directory no one but the agent
 * can change (isTrustedDir), so that it may be read; "absent" when one of them is missing;
 * "foreign" when a link, a file or someone else's directory is in the way, which ownTree would
 * remove or take back before writing there. Reads treat "foreign" as nothing there: they must
 * not follow it, and must not change it either (a dry run writes nothing).
 */
export function ownTreeState(root: string, path: string): "own" | "absent" | "foreign" {
  const names = segmentsBelow(root, path);
  const top = statOrUndefined(root);
  if (top === undefined) return "absent";
  if (!isTrustedDir(top)) return "foreign";
  let at = root;
  for (const name of names) {
    at = join(at, name);
    const info = lstatOrUndefined(at);
    if (info === undefined) return "absent";
    if (!isTrustedDir(info)) return "foreign";
  }
  return "own";
}

function statOrUndefined(path: string): Deno.FileInfo | undefined {
  try {
    return Deno.statSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
}

/**
 * The directories in the trusted directory `dir` (one that ownTree or own made the agent's), each
 * given back to the agent with `access` (own) before it is returned, so that a walk may go on
 * into them; its other entries beside them.
 */
export async function ownedEntries(
  dir: string,
  access?: FileAccess,
): Promise<{ dirs: Deno.DirEntry[]; others: Deno.DirEntry[] }> {
  const dirs: Deno.DirEntry[] = [], others: Deno.DirEntry[] = [];
  for await (const entry of Deno.readDir(dir)) {
    const path = join(dir, entry.name);
    const info = entry.isDirectory ? lstatOrUndefined(path) : undefined;
    if (info?.isDirectory) {
      await own(path, info, access);
      dirs.push(entry);
    } else others.push(entry);
  }
  return { dirs, others };
}

/** Deletes a directory durably if it is empty; one with entries, or none at all, is left be. */
export async function removeIfEmpty(path: string): Promise<"removed" | "kept"> {
  try {
    await Deno.remove(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound || (e as { code?: string }).code === "ENOTEMPTY") {
      return "kept";
    }
    throw e;
  }
  await syncDir(dirname(path));
  return "removed";
}

/**
 * Deletes a directory and everything in it, durably; "absent" when there was none. No link in
 * it is followed (Deno.remove deletes a link as a link, at `path` or inside the tree), so only
 * the directories above it must be the agent's: see removeOwnTree.
 */
export async function removeTree(path: string): Promise<"removed" | "absent"> {
  try {
    await Deno.remove(path, { recursive: true });
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return "absent";
    throw e;
  }
  await syncDir(dirname(path));
  return "removed";
}

/**
 * removeTree of `path`, below the configured directory `root`, once every directory between
 * them is the agent's (ownTree), so that no link above it redirects the deletion.
 */
export async function removeOwnTree(root: string, path: string): Promise<"removed" | "absent"> {
  const parent = dirname(path);
  if (parent !== root && !await ownTree(root, parent, undefined, { create: false })) {
    return "absent";
  }
  return await removeTree(path);
}
