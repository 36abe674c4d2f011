/**
 * The checkpoint trees, in one place: where each checkpoint's files are, what they are named,
 * and the modes and owners they get. The writers (lib/disk/manifests.ts, lib/disk/pod_files.ts),
 * the sanitizer that points volumes at the stored files, the verifier (lib/verify/files.ts) and
 * the demo all read them here.
 *
 * - The inactive dir holds every checkpoint's sanitized manifest; the static-pod dir holds those
 *   of active checkpoints, the same file (a hard link or a copy). A manifest is named after its
 *   checkpoint's id (manifestFileNames; which of the two names, lib/core/manifest_names.ts
 *   decides), MANIFEST_MODE, owned by the agent (root): the kubelet reads it as root.
 * - The secrets dir and the configmaps dir hold one directory per pod, `<dir>/<ns>/<pod>`
 *   (podFileDirs), and in it one directory per rewritten volume (volumeDir), mounted read-only
 *   by the checkpoint as a hostPath. Every directory in these trees belongs to the agent and
 *   no one else can write in it (docs/design.md#file-owners): a container that could change
 *   an entry of its volume could make the agent, which is root, write or delete through a
 *   symbolic link it planted. The pod's user reads its files as the kubelet's own volumes let
 *   it (storedAccess).
 * - Every other directory the agent creates in these trees is DIR_MODE. Directories it finds
 *   (the kubelet's static-pod dir, a configured dir that is a symlink) are left as they are.
 *
 * Pure: no file is read or written here.
 */
import { join } from "node:path";
import { idDigest, type IdParts, isValidNamespace, MAX_NAME_BYTES, parseValidId } from "./ids.ts";
import { asArray, isObject, type Json } from "./json.ts";
import type { Pod } from "./pod.ts";

/** The four directories of the checkpoint trees, as configured. */
export interface CheckpointTrees {
  staticPodDir: string;
  inactiveDir: string;
  secretsDir: string;
  configmapsDir: string;
}

/** The two directories of stored files. */
export type StoredFileDirs = Pick<CheckpointTrees, "secretsDir" | "configmapsDir">;

/** A manifest, in either manifest dir: it may reveal what runs and how. */
export const MANIFEST_MODE = 0o600;
/** Every directory the agent creates in the checkpoint trees, but a volume's (storedAccess). */
export const DIR_MODE = 0o700;

/**
 * Every temp file of ours contains this marker after its leading dot (lib/disk/atomic_write.ts),
 * so a sweep never touches anyone else's, and no stored file may be named like one.
 */
export const TEMP_MARKER = ".ckpt-tmp-";

/**
 * Why `path`, a file's place inside a stored volume (a key of its object, an item's `path`), is
 * refused, or undefined when it is safe: relative, with no empty, `.` or `..` segment, none
 * starting with `..` (the kubelet's own atomic writer names its `..data` so) or named like a temp
 * file of ours, and every segment a name the file system takes. The API server refuses such item
 * paths and keys; a kubelet's answer or a bug might not.
 */
export function unsafeVolumePath(path: string): string | undefined {
  if (path === "") return "empty path";
  if (path.startsWith("/")) return "absolute path";
  if (path.includes("\0")) return "NUL in path";
  for (const segment of path.split("/")) {
    if (segment === "") return "empty path segment";
    if (segment.startsWith("..") || segment === ".") return `path segment ${segment}`;
    if (segment.startsWith(".") && segment.includes(TEMP_MARKER)) {
      return "name of a temp file of ours";
    }
    if (new TextEncoder().encode(segment).length > MAX_NAME_BYTES) return "name too long";
  }
  return undefined;
}

/** Permission bits as chmod and install take them: `0700`. */
export function octalMode(mode: number): string {
  return `0${mode.toString(8)}`;
}

const JSON_SUFFIX = ".json";

/**
 * `<namespace><separator><name>.json` when it fits in MAX_NAME_BYTES (ids are ASCII). Longer,
 * both separators give the one shortened name of the id, as long as fits:
 * `<namespace>_<start of the name>_<idDigest>.json`. Two `_`, where a name given whole has one or
 * none: it is never the name of another id, and its digest is this id's alone
 * (docs/design.md#long-names).
 */
function idFileName(id: string, separator: "-" | "_"): string {
  const { namespace, name } = validId(id);
  const whole = `${namespace}${separator}${name}${JSON_SUFFIX}`;
  if (whole.length <= MAX_NAME_BYTES) return whole;
  const end = `_${idDigest(id)}${JSON_SUFFIX}`;
  return `${namespace}_${name.slice(0, MAX_NAME_BYTES - namespace.length - 1 - end.length)}${end}`;
}

/** A shortened name (idFileName): a namespace, the start of a name, a digest. */
const SHORTENED_FILE_NAME = /^[a-z0-9-]+_[a-z0-9][-a-z0-9.]*_[0-9a-f]{32}\.json$/;

/**
 * bootkube's name for a checkpoint manifest, `<namespace>-<name>.json`: what every checkpoint
 * gets unless another file holds it (lib/core/manifest_names.ts). Ambiguous: `kube/system-x` and
 * `kube-system/x` both map to `kube-system-x.json`. Throws on an id that is not valid.
 */
export function manifestFileName(id: string): string {
  return idFileName(id, "-");
}

/**
 * The unambiguous name, `<namespace>_<name>.json`: namespaces are DNS labels and names DNS
 * subdomains, so neither contains `_`; this name belongs to one id only, and is never bootkube's
 * name of any id. Also the name of the checkpoint's versions directory (without `.json`) and of
 * its status record (lib/store/layout.ts). Throws on an id that is not valid.
 */
export function unambiguousManifestFileName(id: string): string {
  return idFileName(id, "_");
}

/** Whether `file` is the unambiguous name (unambiguousManifestFileName) of some id. */
export function isUnambiguousFileName(file: string): boolean {
  if (SHORTENED_FILE_NAME.test(file)) {
    return file.length === MAX_NAME_BYTES && isValidNamespace(file.split("_")[0]);
  }
  const parts = file.endsWith(JSON_SUFFIX) ? file.slice(0, -JSON_SUFFIX.length).split("_") : [];
  const id = `${parts[0]}/${parts[1]}`;
  return parts.length === 2 && parseValidId(id) !== undefined &&
    unambiguousManifestFileName(id) === file;
}

/**
 * The two names a checkpoint's manifest may have: bootkube's first. The same one twice for an id
 * whose names are shortened.
 */
export function manifestFileNames(id: string): [string, string] {
  return [manifestFileName(id), unambiguousManifestFileName(id)];
}

/** The directories holding every stored file of one pod: what removing its checkpoint deletes. */
export function podFileDirs(dirs: StoredFileDirs, ns: string, pod: string): [string, string] {
  return [`${dirs.secretsDir}/${ns}/${pod}`, `${dirs.configmapsDir}/${ns}/${pod}`];
}

/**
 * The first version of a checkpoint: the one taken when its parent was first seen, whose files
 * are where checkpoints kept them before there were versions.
 */
export const FIRST_VERSION = 1;

/** `_v<n>`: the directory of version n's files in a pod's directories, from the second on. */
const VERSION_DIR = /^_v([1-9][0-9]*)$/;

/** The version whose files a directory directly under a pod's directory holds, if it is one. */
export function versionOfDirName(name: string): number | undefined {
  const match = VERSION_DIR.exec(name);
  return match ? Number(match[1]) : undefined;
}

/**
 * Where version `version` of a pod's stored files lives under `base` (one of StoredFileDirs):
 * the first version in the pod's directory itself, as before versions existed, every later one
 * in `_v<n>` under it. `_` cannot start an object name, so a version's directory never clashes
 * with a volume of the first version. Each version's manifest mounts its own directories only,
 * so a manifest and the files it mounts always belong together.
 */
export function versionRoot(base: string, ns: string, pod: string, version: number): string {
  if (!Number.isSafeInteger(version) || version < FIRST_VERSION) {
    throw new RangeError(`not a checkpoint version: ${version}`);
  }
  const podDir = `${base}/${ns}/${pod}`;
  return version === FIRST_VERSION ? podDir : `${podDir}/_v${version}`;
}

/** The directories of one version's stored files: its secrets' and its configmaps'. */
export function versionFileDirs(
  dirs: StoredFileDirs,
  ns: string,
  pod: string,
  version: number,
): [string, string] {
  return [
    versionRoot(dirs.secretsDir, ns, pod, version),
    versionRoot(dirs.configmapsDir, ns, pod, version),
  ];
}

/**
 * The directory a rewritten volume mounts, under `base` (one of StoredFileDirs), in the
 * directory of its checkpoint's version (versionRoot). A volume with every key of one object
 * (`object`) mounts `<root>/<object>` (the original checkpointer's layout). Volumes that need
 * more get a directory named after the volume, under `_volumes`, which cannot clash with an
 * object name (DNS-1123 names never start with `_`).
 */
export function volumeDir(
  base: string,
  ns: string,
  pod: string,
  volume: string,
  object?: string,
  version = FIRST_VERSION,
): string {
  const root = versionRoot(base, ns, pod, version);
  return object !== undefined ? `${root}/${object}` : `${root}/_volumes/${volume}`;
}

/**
 * A checkpoint's versions, beside the inactive manifests (a dot-named directory, which neither
 * the kubelet nor the agent's reader of manifest dirs opens): `<n>.json` the manifest of each
 * version kept and `<n>.origin.json` what it was made from (originFileName), CANDIDATE_FILE the
 * spec waiting to be promoted, PIN_FILE while it is pinned.
 */
export function versionsDir(trees: Pick<CheckpointTrees, "inactiveDir">, id: string): string {
  const stem = unambiguousManifestFileName(id).slice(0, -JSON_SUFFIX.length);
  return join(trees.inactiveDir, ".versions", stem);
}

/** The file of version n's manifest in versionsDir. */
export function versionFileName(version: number): string {
  return `${version}.json`;
}

/**
 * The file in versionsDir of what version n was made from (its origin: the parent, when, and
 * the predecessor it was inherited from, if it was; docs/design.md#lineage).
 */
export function originFileName(version: number): string {
  return `${version}.origin.json`;
}

/** The version a file in versionsDir holds the manifest of, if it is one. */
export function versionOfFileName(name: string): number | undefined {
  const match = /^([1-9][0-9]*)\.json$/.exec(name);
  return match ? Number(match[1]) : undefined;
}

export const CANDIDATE_FILE = "candidate.json";
export const PIN_FILE = "pinned.json";

/** Every hostPath a manifest mounts. */
export function hostPathsOf(pod: Pod): string[] {
  const volumes = (pod.spec as { volumes?: { hostPath?: { path?: unknown } }[] } | undefined)
    ?.volumes ?? [];
  return volumes.flatMap((v) => typeof v.hostPath?.path === "string" ? [v.hostPath.path] : []);
}

/**
 * The versions whose stored files a checkpoint manifest mounts, read from its hostPaths under
 * the pod's directories: what must not be removed while that manifest is kept.
 */
export function versionsMounted(dirs: StoredFileDirs, id: string, pod: Pod): Set<number> {
  const { namespace, name } = validId(id);
  const mounted = new Set<number>();
  for (const path of hostPathsOf(pod)) {
    for (const podDir of podFileDirs(dirs, namespace, name)) {
      if (!path.startsWith(`${podDir}/`)) continue;
      const first = path.slice(podDir.length + 1).split("/")[0];
      mounted.add(versionOfDirName(first) ?? FIRST_VERSION);
    }
  }
  return mounted;
}

export interface CheckpointPaths {
  inactiveManifest: string;
  activeManifest: string;
  /** The pod's directories of stored secret and configmap files. */
  secretsDir: string;
  configmapsDir: string;
}

/** The parts of `id`; throws on an id that is not safe to use in a file name. */
export function validId(id: string): IdParts {
  const parts = parseValidId(id);
  if (!parts) throw new Error(`not a valid checkpoint id: ${JSON.stringify(id)}`);
  return parts;
}

/**
 * Where one checkpoint's files are; throws on an id that is not safe to use as a file name.
 * `file` is its manifest's name as assignManifestNames gave it; bootkube's name by default, which
 * is every checkpoint's name unless it clashed with another.
 */
export function checkpointPaths(
  trees: CheckpointTrees,
  id: string,
  file = manifestFileName(id),
): CheckpointPaths {
  const parts = validId(id);
  if (!manifestFileNames(id).includes(file)) {
    throw new Error(`${JSON.stringify(file)} is not a name of the manifest of ${id}`);
  }
  const [secretsDir, configmapsDir] = podFileDirs(trees, parts.namespace, parts.name);
  return {
    inactiveManifest: join(trees.inactiveDir, file),
    activeManifest: join(trees.staticPodDir, file),
    secretsDir,
    configmapsDir,
  };
}

/** Who a file or directory belongs to, and its permission bits. */
export interface FileAccess {
  uid: number;
  gid: number;
  mode: number;
}

/**
 * How a checkpoint's stored files and the directories of its volumes are made: `dir` for each
 * volume's directory and every directory below it, `file` for the files.
 */
export interface StoredAccess {
  dir: FileAccess;
  file: FileAccess;
}

function runAsUser(securityContext: unknown): number | undefined {
  return isObject(securityContext) && typeof securityContext.runAsUser === "number"
    ? securityContext.runAsUser
    : undefined;
}

/**
 * The owners and modes of a checkpoint's stored files, as the kubelet makes its own secret and
 * configMap volumes readable, with no bits for anyone else: directories always belong to the
 * agent (`agentUid`, root on a node), so that no container can change an entry the agent
 * writes through. With an `fsGroup`, which every container of the pod has as a supplementary
 * group, files and directories are the agent's with group `fsGroup`, files group-readable.
 * Without, the files belong to the one non-root user the containers run as (the pod's
 * `securityContext` as their default), and the directories are the agent's, open to search by
 * anyone: they are reached only through the volume's mount, since the pod's directory above
 * them is the agent's alone. Two different non-root users without an `fsGroup` cannot both read
 * a file of one owner, so such a pod's files cannot be stored. Root pods: the agent's alone.
 */
export function storedAccess(pod: Pod, agentUid: number): StoredAccess | { error: string } {
  const spec: Json = isObject(pod.spec) ? pod.spec : {};
  const fsGroup = isObject(spec.securityContext) && typeof spec.securityContext.fsGroup === "number"
    ? spec.securityContext.fsGroup
    : undefined;
  if (fsGroup !== undefined) {
    return {
      dir: { uid: agentUid, gid: fsGroup, mode: 0o750 },
      file: { uid: agentUid, gid: fsGroup, mode: 0o640 },
    };
  }
  const podUser = runAsUser(spec.securityContext);
  const users = new Set<number>();
  for (const container of [...asArray(spec.initContainers), ...asArray(spec.containers)]) {
    const user = runAsUser(container.securityContext) ?? podUser ?? 0;
    if (user !== 0) users.add(user);
  }
  if (users.size > 1) {
    return {
      error: `containers run as different users (${[...users].join(", ")}) and no fsGroup ` +
        "is set, so no file can be readable by all of them alone",
    };
  }
  const [user] = users;
  if (user === undefined) {
    return {
      dir: { uid: agentUid, gid: 0, mode: DIR_MODE },
      file: { uid: agentUid, gid: 0, mode: 0o600 },
    };
  }
  return { dir: { uid: agentUid, gid: 0, mode: 0o755 }, file: { uid: user, gid: 0, mode: 0o600 } };
}
