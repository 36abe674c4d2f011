/**
 * Which directories cannot be written, and whether two are on one mount, without writing.
 *
 * The daemon and the agent ask the kernel with a rename that cannot change anything (renameProbe):
 * it works with the compiled binary's permissions, where Deno lets nothing under /proc be read
 * without --allow-all. `ckpt-agent doctor` also reads /proc/self/mountinfo, for the mount points'
 * names, where it can. Neither writes: a probe file would change a directory's mtime on every
 * pass, and Deno's node:fs access(W_OK) compares mode bits instead of calling access(2), so it
 * answers "writable" for root on a read-only mount.
 */
import { basename, dirname, join } from "node:path";
import { TEMP_MARKER } from "./atomic_write.ts";

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

/** The directory itself, or the nearest ancestor that exists (where it would be created). */
export function nearestExisting(path: string): string {
  for (let dir = path;; dir = dirname(dir)) {
    try {
      if (Deno.statSync(dir).isDirectory) return dir;
    } catch {
      // Missing, or not ours to see: its parent is asked.
    }
    if (dir === dirname(dir)) return dir;
  }
}

type ProbeAnswer = "writable" | "read-only" | "separate mounts" | "unknown";

/**
 * Renames a name that does not exist in `fromDir` to one in `toDir`. The kernel checks the
 * mounts before it looks the name up, so the answer says about them what a write would meet:
 * EXDEV when the two directories are on separate mounts (link(2) would fail there too), EROFS
 * when the mount is read-only, and ENOENT when a write could go ahead. Nothing is created,
 * changed or stamped.
 */
function renameProbe(fromDir: string, toDir: string): ProbeAnswer {
  const random = () => crypto.randomUUID().slice(0, 8);
  const name = `.ckpt-agent-probe${TEMP_MARKER}${random()}`;
  try {
    Deno.renameSync(join(fromDir, name), join(toDir, `${name}-${random()}`));
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === "ENOENT") return "writable";
    if (code === "EROFS") return "read-only";
    if (code === "EXDEV") return "separate mounts";
    return "unknown";
  }
  // The name existed after all (it never does): it only moved within our own temp names.
  return "unknown";
}

/**
 * The two directories (each, when missing, its nearest existing ancestor) when they are on
 * separate mounts, else undefined. A hard link between them then fails (EXDEV), even when both
 * mounts show one file system, as bind mounts and a unit's separate ReadWritePaths= entries do.
 */
export function separateMounts(a: string, b: string): [string, string] | undefined {
  const [da, db] = [nearestExisting(a), nearestExisting(b)];
  return renameProbe(da, db) === "separate mounts" ? [da, db] : undefined;
}

/**
 * Of `dirs` (absolute paths), those on a read-only file system, each with why; a missing
 * directory is judged by the nearest ancestor that exists. What cannot be told is not claimed.
 * Synchronous, like the stats of a steady pass (docs/benchmarks.md): through Deno's blocking
 * pool every call waits for a thread round trip.
 */
export function readOnlyDirs(dirs: readonly string[]): Map<string, string> {
  const found = new Map<string, string>();
  for (const dir of dirs) {
    const existing = nearestExisting(dir);
    if (renameProbe(existing, existing) === "read-only") {
      found.set(dir, `on a read-only file system (${existing} refuses writes: EROFS)`);
    }
  }
  return found;
}
