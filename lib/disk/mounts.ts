/**
 * Which directories lie on a read-only mount, as the kernel shows this process its mounts
 * (/proc/self/mountinfo, so a unit's ProtectSystem= view counts). This is how readiness learns,
 * every pass and without writing, that a checkpoint directory cannot be written: a probe file
 * would change the directory's mtime on every pass, and Deno's node:fs access(W_OK) compares mode
 * bits instead of calling access(2), so it answers "writable" for root on a read-only mount.
 */
import { basename, dirname, join } from "node:path";

export interface MountPoint {
  /** Where it is mounted, unescaped. */
  path: string;
  readOnly: boolean;
}

/** mountinfo escapes space, tab, newline and backslash as three octal digits. */
function unescapeOctal(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal) => String.fromCharCode(parseInt(octal, 8)));
}

/**
 * The mount points of a mountinfo text (proc(5)): field 5 is the mount point, field 6 the
 * per-mount options; after the "-" separator come the type, the source and the super block's
 * options. Either option list saying `ro` makes the mount read-only.
 */
export function parseMountInfo(text: string): MountPoint[] {
  const mounts: MountPoint[] = [];
  for (const line of text.split("\n")) {
    const fields = line.split(" ");
    const separator = fields.indexOf("-", 6);
    if (fields.length < 6 || separator === -1) continue;
    const readOnly = [fields[5], fields[separator + 3] ?? ""].some((options) =>
      options.split(",").includes("ro")
    );
    mounts.push({ path: unescapeOctal(fields[4]), readOnly });
  }
  return mounts;
}

function contains(mountPoint: string, path: string): boolean {
  return mountPoint === "/" || path === mountPoint || path.startsWith(`${mountPoint}/`);
}

/** The mount `path` (absolute, symlinks resolved) lies on: the deepest, and the last mounted. */
export function mountOf(mounts: MountPoint[], path: string): MountPoint | undefined {
  let found: MountPoint | undefined;
  for (const mount of mounts) {
    if (contains(mount.path, path) && mount.path.length >= (found?.path.length ?? 0)) {
      found = mount;
    }
  }
  return found;
}

/**
 * `path` (absolute) with its symlinks resolved; when it does not exist, its nearest existing
 * ancestor resolved, with the rest appended (where it would be created). As it is when even
 * that cannot be resolved.
 */
export function resolvedPath(path: string): string {
  const missing: string[] = [];
  for (let dir = path;; dir = dirname(dir)) {
    try {
      return join(Deno.realPathSync(dir), ...missing.reverse());
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound) || dir === dirname(dir)) return path;
      missing.push(basename(dir));
    }
  }
}

/** This process's mounts; throws when /proc/self/mountinfo cannot be read. */
export function readMountInfo(): MountPoint[] {
  return parseMountInfo(Deno.readTextFileSync("/proc/self/mountinfo"));
}

function readMounts(): MountPoint[] | undefined {
  try {
    return readMountInfo();
  } catch {
    return undefined;
  }
}

/**
 * The mount points of two directories when they differ, else undefined (also when the mounts
 * cannot be read). A hard link between them then fails (EXDEV), even when both mounts show one
 * file system, as bind mounts and a unit's separate ReadWritePaths= entries do.
 */
export function separateMounts(a: string, b: string): [string, string] | undefined {
  const mounts = readMounts();
  if (!mounts) return undefined;
  const [ma, mb] = [mountOf(mounts, resolvedPath(a)), mountOf(mounts, resolvedPath(b))];
  return ma && mb && ma !== mb ? [ma.path, mb.path] : undefined;
}

/**
 * Of `dirs` (absolute paths), those on a read-only mount, each with the mount point; a missing
 * directory is judged by the nearest ancestor that exists. Empty when the mounts cannot be read
 * (no /proc): nothing is claimed that was not seen. Synchronous, like the stats of a steady pass
 * (docs/benchmarks.md): through Deno's blocking pool every call waits for a thread round trip.
 */
export function readOnlyDirs(dirs: readonly string[]): Map<string, string> {
  const mounts = readMounts();
  if (!mounts) return new Map();
  const found = new Map<string, string>();
  for (const dir of dirs) {
    const mount = mountOf(mounts, resolvedPath(dir));
    if (mount?.readOnly) found.set(dir, `on a read-only mount (${mount.path})`);
  }
  return found;
}
