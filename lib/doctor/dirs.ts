/**
 * The configured directories: each exists with its owner and mode, none is on a read-only mount,
 * the static-pod dir and the inactive dir share one mount (activation hard-links, which needs no
 * free space: across mounts it copies, and fails on a full disk), and each file system has room
 * for the checkpoints.
 */
import { statfs } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { Config } from "../config/types.ts";
import { DIR_MODE, octalMode } from "../core/checkpoint_layout.ts";
import { lockDirDistrust, lockFileDistrust } from "../disk/lock.ts";
import {
  mountOf,
  type MountPoint,
  nearestExisting,
  readMountInfo,
  readOnlyDirs,
  resolvedPath,
  separateMounts,
} from "../disk/mounts.ts";
import { STORE_DIR_MODE } from "../store/layout.ts";
import { type CheckName, error, type Finding, ok, warning } from "./finding.ts";

/**
 * - kubelet: the kubelet's directory; the agent only needs it root's and written by no one else.
 * - checkpoints: the agent's trees; what they hold becomes static pods and their files.
 * - state: the agent's records; without them it goes on, from memory.
 * - lock: the lock file's directory, root's alone (the unit's RuntimeDirectory); the agent makes
 *   it when missing, and runs without the lock when anyone else could hold or change it.
 */
type Role = "kubelet" | "checkpoints" | "state" | "lock";

export interface ConfiguredDir {
  /** The setting that names it. */
  setting:
    | "staticPodDir"
    | "inactiveDir"
    | "secretsDir"
    | "configmapsDir"
    | "stateDir"
    | "lockFile";
  path: string;
  role: Role;
  /** The mode the agent and install.sh create it with. */
  mode?: number;
}

export function configuredDirs(config: Config): ConfiguredDir[] {
  return [
    { setting: "staticPodDir", path: config.staticPodDir, role: "kubelet" },
    { setting: "inactiveDir", path: config.inactiveDir, role: "checkpoints", mode: DIR_MODE },
    { setting: "secretsDir", path: config.secretsDir, role: "checkpoints", mode: DIR_MODE },
    { setting: "configmapsDir", path: config.configmapsDir, role: "checkpoints", mode: DIR_MODE },
    { setting: "stateDir", path: config.stateDir, role: "state", mode: STORE_DIR_MODE },
    { setting: "lockFile", path: dirname(config.lockFile), role: "lock" },
  ];
}

/** Whether a problem with the directory keeps checkpoints from being activated. */
function activationNeeds(dir: ConfiguredDir): boolean {
  return dir.role === "kubelet" || dir.role === "checkpoints";
}

/**
 * A problem with the directory: an error where it keeps checkpoints from being activated, a
 * warning where the agent goes on without it.
 */
export function dirProblem(
  dir: ConfiguredDir,
  check: CheckName,
  found: string,
  fix: string,
): Finding {
  return activationNeeds(dir)
    ? error(check, dir.path, found, fix)
    : warning(check, dir.path, `${found}${CONSEQUENCE[dir.role]}`, fix);
}

export function describeDir(dir: ConfiguredDir): string {
  return dir.setting === "lockFile" ? `the lock file's directory ${dir.path}` : dir.path;
}

/** Where a directory is, or would be created: itself, or its nearest existing ancestor. */
async function existingAt(path: string): Promise<{ at: string; dev: number }> {
  const at = nearestExisting(resolvedPath(path));
  return { at, dev: (await Deno.stat(at)).dev };
}

/** What another user who can write the directory could do. */
const WHO_ELSE_COULD: Partial<Record<ConfiguredDir["setting"], string>> = {
  staticPodDir: "another user could make the kubelet run any pod, as root",
  inactiveDir: "another user could put a pod there that the agent hands the kubelet, as root",
  secretsDir: "another user could change the files checkpoints mount",
  configmapsDir: "another user could change the files checkpoints mount",
  stateDir: "another user could rewrite the agent's records",
};

const CONSEQUENCE: Record<Role, string> = {
  kubelet: "",
  checkpoints: "",
  state: ": the agent then keeps its states in memory only",
  lock: ": the agent then runs without the single-agent lock",
};

function missingFinding(dir: ConfiguredDir): Finding {
  const mode = dir.mode ?? (dir.role === "kubelet" ? 0o755 : undefined);
  return warning(
    "directory",
    dir.path,
    `${describeDir(dir)} (${dir.setting}) does not exist; the agent creates a missing directory ` +
      `(${octalMode(DIR_MODE)}) when it first writes there${CONSEQUENCE[dir.role]}`,
    `create it (install.sh does${
      mode === undefined ? "" : `: install -d -m ${octalMode(mode)} ${dir.path}`
    }), or correct ${dir.setting} if it is mistyped`,
  );
}

function ownerFindings(dir: ConfiguredDir, info: Deno.FileInfo): Finding[] {
  const mode = (info.mode ?? 0) & 0o7777;
  const shown = `${describeDir(dir)} (${dir.setting}): owner ${info.uid}:${info.gid}, mode ` +
    octalMode(mode);
  const wanted = dir.mode !== undefined ? `chmod ${octalMode(dir.mode)} ${dir.path}` : "";
  if (info.uid !== 0 || (mode & 0o022) !== 0) {
    const why = WHO_ELSE_COULD[dir.setting] ?? "";
    return [error(
      "directory",
      dir.path,
      `${shown}: ${info.uid !== 0 ? "not owned by root" : "writable by group or others"}: ${why}`,
      `chown root:root ${dir.path}; ${wanted || `chmod go-w ${dir.path}`}`,
    )];
  }
  if (dir.mode !== undefined && (mode & ~dir.mode) !== 0) {
    return [warning(
      "directory",
      dir.path,
      `${shown}, expected ${octalMode(dir.mode)}: others can list what it holds`,
      wanted,
    )];
  }
  return [ok("directory", dir.path, shown)];
}

async function dirFindings(dir: ConfiguredDir): Promise<Finding[]> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.stat(dir.path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return [missingFinding(dir)];
    return [dirProblem(
      dir,
      "directory",
      `${describeDir(dir)} (${dir.setting}) cannot be examined: ${(e as Error).message}`,
      `make ${dir.path} a directory root can read`,
    )];
  }
  if (!info.isDirectory) {
    return [dirProblem(
      dir,
      "directory",
      `${describeDir(dir)} (${dir.setting}) is not a directory`,
      `move what is at ${dir.path} away, or correct ${dir.setting}`,
    )];
  }
  return ownerFindings(dir, info);
}

/**
 * The lock file's directory, and the lock file when there is one, by the rules the agent takes
 * the lock by (lib/disk/lock.ts). Missing is fine: the agent makes it, 0700.
 */
async function lockFindings(dir: ConfiguredDir, lockFile: string): Promise<Finding[]> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.lstat(dir.path);
  } catch (e) {
    return [
      e instanceof Deno.errors.NotFound
        ? ok(
          "directory",
          dir.path,
          `${describeDir(dir)} does not exist; the agent makes it (0700) when it takes the lock`,
        )
        : dirProblem(
          dir,
          "directory",
          `${describeDir(dir)} cannot be examined: ${(e as Error).message}`,
          `make ${dir.path} a directory root can read`,
        ),
    ];
  }
  const dirWhy = lockDirDistrust(info);
  const file = dirWhy === undefined ? await Deno.lstat(lockFile).catch(() => undefined) : undefined;
  const fileWhy = file && lockFileDistrust(file, info);
  const [what, path, why] = dirWhy !== undefined
    ? [describeDir(dir), dir.path, dirWhy]
    : [`the lock file ${lockFile}`, lockFile, fileWhy];
  if (why === undefined) {
    const alone = `${describeDir(dir)}: root's alone${file ? ", and so is the lock file" : ""}`;
    return [ok("directory", dir.path, alone)];
  }
  return [dirProblem(
    dir,
    "directory",
    `${what} ${why}: someone other than root could hold the lock or change it`,
    `remove ${path} (the agent makes its own), or move lockFile into a directory only root can ` +
      "write",
  )];
}

const SEPARATE_MOUNTS = "activation copies the manifest instead of hard-linking it, and a " +
  "copy fails on a full disk (link(2) does not cross mounts, even of one file system)";

function mountFindings(dirs: ConfiguredDir[], config: Config): Finding[] {
  const subject = `${config.staticPodDir}, ${config.inactiveDir}`;
  const moveInactive = (mount: string) =>
    `move inactiveDir under ${mount} (inactiveDir in the configuration file, or ` +
    "--inactive-dir), or bind-mount one directory that holds both";
  let mounts: MountPoint[];
  try {
    mounts = readMountInfo();
  } catch {
    // Deno lets nothing under /proc be read without --allow-all (the compiled binary has less):
    // the kernel is asked with rename probes instead, which tell as much but name no mount.
    return probedMountFindings(dirs, config, subject, moveInactive);
  }
  const findings: Finding[] = [];
  for (const dir of dirs) {
    const mount = mountOf(mounts, resolvedPath(dir.path));
    if (!mount?.readOnly) continue;
    findings.push(dirProblem(
      dir,
      "mount",
      `${describeDir(dir)} (${dir.setting}) is on a read-only mount (${mount.path})` +
        (activationNeeds(dir) ? ": checkpoints cannot be written or activated" : ""),
      `remount ${mount.path} read-write, or move ${dir.setting} to a writable file system`,
    ));
  }
  const active = mountOf(mounts, resolvedPath(config.staticPodDir));
  const inactive = mountOf(mounts, resolvedPath(config.inactiveDir));
  if (active !== inactive) {
    findings.push(warning(
      "mount",
      subject,
      `staticPodDir is on mount ${active?.path} and inactiveDir on mount ${inactive?.path}: ` +
        SEPARATE_MOUNTS,
      moveInactive(`the mount ${active?.path}`),
    ));
  } else {
    findings.push(ok(
      "mount",
      subject,
      `staticPodDir and inactiveDir are on one mount (${active?.path}): activation hard-links, ` +
        "which needs no free space",
    ));
  }
  return findings;
}

/** The mount findings from rename probes (lib/disk/mounts.ts), where mountinfo is unreadable. */
function probedMountFindings(
  dirs: ConfiguredDir[],
  config: Config,
  subject: string,
  moveInactive: (mount: string) => string,
): Finding[] {
  const readOnly = readOnlyDirs(dirs.map((dir) => dir.path));
  const findings: Finding[] = dirs.flatMap((dir) => {
    const why = readOnly.get(dir.path);
    if (why === undefined) return [];
    return [dirProblem(
      dir,
      "mount",
      `${describeDir(dir)} (${dir.setting}) is ${why}` +
        (activationNeeds(dir) ? ": checkpoints cannot be written or activated" : ""),
      `remount it read-write (\`findmnt -T ${dir.path}\` names the mount), or move ` +
        `${dir.setting} to a writable file system`,
    )];
  });
  const separate = separateMounts(config.staticPodDir, config.inactiveDir);
  findings.push(
    separate
      ? warning(
        "mount",
        subject,
        `staticPodDir (${separate[0]}) and inactiveDir (${separate[1]}) are on separate mounts: ` +
          SEPARATE_MOUNTS,
        moveInactive(`the mount of ${separate[0]} (\`findmnt -T ${separate[0]}\`)`),
      )
      : ok(
        "mount",
        subject,
        "staticPodDir and inactiveDir are on one mount: activation hard-links, which needs no " +
          "free space",
      ),
  );
  return findings;
}

/** The room checked for at least, however small the checkpoints are now. */
export const ROOM_FLOOR_BYTES = 16 * 1024 * 1024;

/** Bytes of the regular files under `path`; what cannot be read counts as nothing. */
async function treeBytes(path: string): Promise<number> {
  let total = 0;
  try {
    for await (const entry of Deno.readDir(path)) {
      const child = join(path, entry.name);
      if (entry.isDirectory) total += await treeBytes(child);
      else if (entry.isFile) total += (await Deno.lstat(child)).size;
    }
  } catch {
    // Gone or unreadable: the directory findings say so.
  }
  return total;
}

function mib(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/**
 * The room a file system needs: what the checkpoints and records on it take now, so that each
 * can be written once more (a refresh, a new parent of the same size), or ROOM_FLOOR_BYTES when
 * that is less. The static-pod dir is not counted: its checkpoints are links to the inactive
 * ones, and the rest is the kubelet's.
 */
async function roomFindings(dirs: ConfiguredDir[]): Promise<Finding[]> {
  const byDevice = new Map<number, { dirs: ConfiguredDir[]; at: string }>();
  for (const dir of dirs) {
    const { at, dev } = await existingAt(dir.path);
    const group = byDevice.get(dev) ?? { dirs: [], at };
    group.dirs.push(dir);
    byDevice.set(dev, group);
  }
  const findings: Finding[] = [];
  for (const { dirs: held, at } of byDevice.values()) {
    const subject = held.map((d) => d.setting).join(", ");
    let free: number;
    try {
      const fs = await statfs(at);
      free = fs.bavail * fs.bsize;
    } catch (e) {
      findings.push(warning(
        "disk-room",
        subject,
        `free space not checked: ${(e as Error).message}`,
        `check with \`df -h ${at}\` that there is room for the checkpoints`,
      ));
      continue;
    }
    const counted = held.filter((d) => d.role === "checkpoints" || d.role === "state");
    const used = (await Promise.all(counted.map((d) => treeBytes(d.path))))
      .reduce((a, b) => a + b, 0);
    const needed = Math.max(used, ROOM_FLOOR_BYTES);
    const basis = used >= ROOM_FLOOR_BYTES
      ? `the ${mib(used)} its checkpoints and records take now`
      : `the floor of ${mib(ROOM_FLOOR_BYTES)} (its checkpoints and records take ${mib(used)})`;
    const found = `${mib(free)} free on the file system of ${subject} (${at}); needed: ${basis}`;
    findings.push(
      free >= needed ? ok("disk-room", subject, found) : warning(
        "disk-room",
        subject,
        `${found}: writes of checkpoints and records fail until there is room (activation by ` +
          "hard link still works)",
        `free space on the file system of ${at} (\`df -h ${at}\`)`,
      ),
    );
  }
  return findings;
}

export async function directoryFindings(config: Config): Promise<Finding[]> {
  const dirs = configuredDirs(config);
  return [
    ...(await Promise.all(
      dirs.map((dir) =>
        dir.role === "lock" ? lockFindings(dir, config.lockFile) : dirFindings(dir)
      ),
    )).flat(),
    ...mountFindings(dirs, config),
    ...await roomFindings(dirs),
  ];
}
