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
 * The directory a rewritten volume mounts, under `base` (one of StoredFileDirs). A volume with
 * every key of one object (`object`) mounts `<base>/<ns>/<pod>/<object>` (the original
 * checkpointer's layout). Volumes that need more get a directory named after the volume, under
 * `_volumes`, which cannot clash with an object name (DNS-1123 names never start with `_`).
 */
export function volumeDir(
  base: string,
  ns: string,
  pod: string,
  volume: string,
  object?: string,
): string {
  return object !== undefined
    ? `${base}/${ns}/${pod}/${object}`
    : `${base}/${ns}/${pod}/_volumes/${volume}`;
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
