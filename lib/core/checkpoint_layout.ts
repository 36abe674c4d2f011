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
 *   (podFileDirs), and in it one directory per rewritten volume (volumeDir), mounted by the
 *   checkpoint as a hostPath. The files are STORED_FILE_MODE; the volume's directory and all
 *   below it belong to the pod's user (storedFilesOwner), which alone can read them, the
 *   directories above it to the agent.
 * - Every directory the agent creates in these trees is DIR_MODE. Directories it finds (the
 *   kubelet's static-pod dir, a configured dir that is a symlink) are left as they are.
 *
 * Pure: no file is read or written here.
 */
import { join } from "node:path";
import { type IdParts, parseValidId } from "./ids.ts";
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
/** A stored secret, configmap or downward-API file: readable by the pod's user alone. */
export const STORED_FILE_MODE = 0o600;
/** Every directory the agent creates in the checkpoint trees. */
export const DIR_MODE = 0o700;

/** Permission bits as chmod and install take them: `0700`. */
export function octalMode(mode: number): string {
  return `0${mode.toString(8)}`;
}

/**
 * bootkube's name for a checkpoint manifest, `<namespace>-<name>.json`: what every checkpoint
 * gets unless another file holds it (lib/core/manifest_names.ts). Ambiguous: `kube/system-x` and
 * `kube-system/x` both map to `kube-system-x.json`.
 */
export function manifestFileName(id: string): string {
  return `${id.replace("/", "-")}.json`;
}

/**
 * The unambiguous name, `<namespace>_<name>.json`: namespaces are DNS labels and names DNS
 * subdomains, so neither contains `_`; this name belongs to one id only, and is never bootkube's
 * name of any id.
 */
export function unambiguousManifestFileName(id: string): string {
  return `${id.replace("/", "_")}.json`;
}

/** The two names a checkpoint's manifest may have: bootkube's first. */
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
  return join(trees.inactiveDir, ".versions", unambiguousManifestFileName(id).slice(0, -5));
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

export interface FileOwner {
  uid: number;
  gid: number;
}

function runAsUser(securityContext: unknown): number | undefined {
  return isObject(securityContext) && typeof securityContext.runAsUser === "number"
    ? securityContext.runAsUser
    : undefined;
}

/**
 * Who owns a checkpoint's stored files, so that its containers can read them: the one non-root
 * user its containers run as (root by default), and the pod's fsGroup. Two different non-root
 * users cannot both read a STORED_FILE_MODE file, so that pod's files cannot be written
 * correctly.
 */
export function storedFilesOwner(pod: Pod): FileOwner | { error: string } {
  const spec: Json = isObject(pod.spec) ? pod.spec : {};
  const podUser = runAsUser(spec.securityContext);
  const users = new Set<number>();
  for (const container of [...asArray(spec.initContainers), ...asArray(spec.containers)]) {
    const user = runAsUser(container.securityContext) ?? podUser ?? 0;
    if (user !== 0) users.add(user);
  }
  if (users.size > 1) {
    return { error: `containers run as different users (${[...users].join(", ")})` };
  }
  const fsGroup = isObject(spec.securityContext) && typeof spec.securityContext.fsGroup === "number"
    ? spec.securityContext.fsGroup
    : 0;
  return { uid: [...users][0] ?? 0, gid: fsGroup };
}
