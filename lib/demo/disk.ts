/**
 * What the demo shows of the node's disk: a listing of the agent's directories (kind, mode,
 * owner, size) taken before and after each pass, and the difference between two listings, so
 * that "what it wrote" is read from the disk, not from the agent's own account.
 */
import { join, relative } from "node:path";

export interface DiskEntry {
  /** Relative to the node's root directory. */
  path: string;
  type: "file" | "dir";
  /** `0600` */
  mode: string;
  /** `uid:gid` */
  owner: string;
  size: number;
  /** Changes when a file is replaced (atomic writes rename a new file into place). */
  ino: number;
  mtimeMs: number;
}

export type DiskListing = Map<string, DiskEntry>;

export interface DiskChanges {
  created: DiskEntry[];
  /** Replaced or rewritten, or its mode or owner changed. */
  changed: DiskEntry[];
  removed: string[];
}

/** Permission bits as `ls -l` users read them: `0600`. */
export function formatMode(mode: number | null): string {
  return mode === null ? "?" : (mode & 0o7777).toString(8).padStart(4, "0");
}

async function walk(root: string, dir: string, into: DiskListing): Promise<void> {
  let entries: Deno.DirEntry[];
  try {
    entries = await Array.fromAsync(Deno.readDir(dir));
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return;
    throw e;
  }
  for (const entry of entries) {
    const path = join(dir, entry.name);
    const info = await Deno.lstat(path);
    const rel = relative(root, path);
    into.set(rel, {
      path: rel,
      type: info.isDirectory ? "dir" : "file",
      mode: formatMode(info.mode),
      owner: `${info.uid}:${info.gid}`,
      size: info.size,
      ino: info.ino ?? 0,
      mtimeMs: info.mtime?.getTime() ?? 0,
    });
    if (info.isDirectory) await walk(root, path, into);
  }
}

/** Everything below `dirs` (not the dirs themselves), keyed by path relative to `root`. */
export async function listDisk(root: string, dirs: string[]): Promise<DiskListing> {
  const listing: DiskListing = new Map();
  for (const dir of dirs) await walk(root, dir, listing);
  return new Map([...listing].sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0));
}

function sameEntry(a: DiskEntry, b: DiskEntry): boolean {
  if (a.type !== b.type || a.mode !== b.mode || a.owner !== b.owner || a.ino !== b.ino) {
    return false;
  }
  // A directory's size and mtime change with every file written inside it: not a change of its own.
  return a.type === "dir" || (a.size === b.size && a.mtimeMs === b.mtimeMs);
}

export function diskChanges(before: DiskListing, after: DiskListing): DiskChanges {
  const changes: DiskChanges = { created: [], changed: [], removed: [] };
  for (const [path, entry] of after) {
    const old = before.get(path);
    if (!old) changes.created.push(entry);
    else if (!sameEntry(old, entry)) changes.changed.push(entry);
  }
  for (const path of before.keys()) if (!after.has(path)) changes.removed.push(path);
  return changes;
}
