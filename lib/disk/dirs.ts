/**
 * Directories under the agent's trees: created with their final mode and made durable (the
 * parent fsynced), like every file written through atomic_write.ts.
 */
import { dirname, resolve } from "node:path";
import type { FileOwner } from "../core/checkpoint_layout.ts";
import { type DirSync, syncDir, syncEntry } from "./atomic_write.ts";

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
    if (!info.isDirectory) throw new Error(`${path} exists and is not a directory`);
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
 * A real directory (never a symlink) with exactly `mode` and `owner`, inside a tree only the
 * agent writes: whatever else is at `path` is replaced, so that nothing written below it can
 * land outside the tree. `sync` as ensureDir's.
 */
export async function ensureOwnedDir(
  path: string,
  mode: number,
  owner: FileOwner,
  sync: DirSync = true,
): Promise<void> {
  let info: Deno.FileInfo | undefined;
  try {
    info = await Deno.lstat(path);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  if (info && !info.isDirectory) {
    await Deno.remove(path);
    info = undefined;
  }
  if (!info) await makeDir(path, mode, sync);
  else if (info.mode === null || (info.mode & 0o7777) !== mode) await Deno.chmod(path, mode);
  // Checked on every pass, so an owner lost in a crash right after mkdir is set again.
  if (!info || info.uid !== owner.uid || info.gid !== owner.gid) {
    await Deno.chown(path, owner.uid, owner.gid);
  }
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

/** Deletes a directory and everything in it, durably; "absent" when there was none. */
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
