/**
 * Checkpoint manifests on disk: reading the kubelet's static-pod directory and the inactive
 * directory, and the writes of DESIGN §2.4 step 5. Only `<ns>-<name>.json` files named after a
 * valid id are ever written or deleted; every other file is read, maybe reported, never touched.
 */
import { basename, dirname, join } from "node:path";
import { parse as parseYaml } from "yaml";
import { manifestFileName, parseValidId } from "../core/ids.ts";
import { isCheckpoint, type Pod, podId, PodSchema } from "../core/pod.ts";
import { podFileDirs } from "../core/sanitize.ts";
import { formatSchemaError } from "../core/schema_error.ts";
import { atomicWrite, removeDurably, type WriteOutcome } from "./atomic_write.ts";
import { mapConcurrent } from "../store/map_concurrent.ts";
import { ensureDir, removeIfEmpty, removeTree } from "./dirs.ts";
import { ParsedFiles } from "./verified_files.ts";

export interface ManifestPaths {
  staticPodDir: string;
  inactiveDir: string;
  secretsDir: string;
  configmapsDir: string;
}

export interface ManifestFile {
  /** Full path of the file the pod was read from. */
  file: string;
  pod: Pod;
  /** Named `<ns>-<name>.json` after the pod's own valid id: a file this agent may write. */
  ours: boolean;
}

export interface ManifestProblem {
  file: string;
  problem: string;
}

export interface ManifestDir {
  pods: Pod[];
  manifests: ManifestFile[];
  problems: ManifestProblem[];
}

/** Far above any pod manifest; a bigger file is not read into memory. */
const MAX_MANIFEST_BYTES = 1024 * 1024;

/** Reads kept in flight: each Deno file call waits for a thread-pool round trip. */
const READS_IN_FLIGHT = 32;

const MANIFEST_MODE = 0o600;
const DIR_MODE = 0o700;

function parseManifest(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    // Not JSON: YAML, as kubeadm writes its static pods (YAML errors are the clearer ones).
    return parseYaml(text, { prettyErrors: false });
  }
}

/** What a manifest file was read as, reusable while the file is unchanged. */
export type ManifestCache = ParsedFiles<ManifestFile | ManifestProblem>;

export function manifestCache(): ManifestCache {
  return new ParsedFiles();
}

async function readManifest(
  file: string,
  cache?: ManifestCache,
): Promise<ManifestFile | ManifestProblem | undefined> {
  let info: Deno.FileInfo;
  try {
    // In place, as lstatOrUndefined in verified_files.ts is, and for the same reason.
    info = Deno.statSync(file);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined; // deleted meanwhile
    throw e;
  }
  // The kubelet does not descend into directories either.
  if (!info.isFile) return undefined;
  const cached = cache?.get(file, info);
  if (cached) return cached;
  const read = await parseManifestFile(file, info);
  if (read) cache?.set(file, info, read);
  return read;
}

async function parseManifestFile(
  file: string,
  info: Deno.FileInfo,
): Promise<ManifestFile | ManifestProblem | undefined> {
  if (info.size > MAX_MANIFEST_BYTES) {
    return { file, problem: `larger than ${MAX_MANIFEST_BYTES} bytes; not read` };
  }
  let doc: unknown;
  try {
    doc = parseManifest(
      new TextDecoder("utf-8", { fatal: true }).decode(await Deno.readFile(file)),
    );
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    return { file, problem: `not JSON or YAML: ${(e as Error).message.split("\n")[0]}` };
  }
  const result = PodSchema.safeParse(doc);
  if (!result.success) return { file, problem: `not a pod: ${formatSchemaError(result.error)}` };
  const id = podId(result.data);
  const ours = parseValidId(id) !== undefined && basename(file) === manifestFileName(id);
  return { file, pod: result.data, ours };
}

/**
 * Every pod in a manifest directory, read as the kubelet reads it: every regular file whose name
 * does not start with a dot, whatever its extension, JSON or YAML. A missing directory is empty.
 * With a cache (one per directory), files unchanged since they were last read are not read again;
 * the pods returned are then the same objects as before, which nobody may modify.
 */
export async function readManifestDir(dir: string, cache?: ManifestCache): Promise<ManifestDir> {
  const names: string[] = [];
  try {
    for (const entry of Deno.readDirSync(dir)) {
      if (!entry.name.startsWith(".")) names.push(entry.name);
    }
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  const out: ManifestDir = { pods: [], manifests: [], problems: [] };
  const paths = names.sort().map((name) => join(dir, name));
  const reads = await mapConcurrent(paths, READS_IN_FLIGHT, (path) => readManifest(path, cache));
  cache?.retain(new Set(paths));
  for (const read of reads) {
    if (!read) continue;
    if ("problem" in read) {
      out.problems.push(read);
    } else {
      out.manifests.push(read);
      out.pods.push(read.pod);
    }
  }
  return out;
}

export interface CheckpointPaths {
  inactiveManifest: string;
  activeManifest: string;
  /** The pod's directories of stored secret and configmap files. */
  secretsDir: string;
  configmapsDir: string;
}

/** Where one checkpoint's files are; throws on an id that is not safe to use as a file name. */
export function checkpointPaths(paths: ManifestPaths, id: string): CheckpointPaths {
  const parts = parseValidId(id);
  if (!parts) throw new Error(`not a valid checkpoint id: ${JSON.stringify(id)}`);
  const file = manifestFileName(id);
  const [secretsDir, configmapsDir] = podFileDirs(
    { secretsDir: paths.secretsDir, configMapsDir: paths.configmapsDir },
    parts.namespace,
    parts.name,
  );
  return {
    inactiveManifest: join(paths.inactiveDir, file),
    activeManifest: join(paths.staticPodDir, file),
    secretsDir,
    configmapsDir,
  };
}

/** Pretty JSON, so that an operator can read and diff a checkpoint. */
export function renderManifest(pod: Pod): string {
  return `${JSON.stringify(pod, null, 2)}\n`;
}

/** Someone else's manifest sits where a checkpoint's would: the agent must not touch it. */
export class ForeignManifestError extends Error {
  constructor(readonly file: string, id: string) {
    super(`${file} is not a checkpoint of ${id}; left alone`);
    this.name = "ForeignManifestError";
  }
}

/**
 * Throws unless `file` is absent or holds a checkpoint of `id`. A file that does not parse at
 * all is taken for a damaged checkpoint (the original checkpointer wrote without fsync) and may
 * be replaced; a pod that is not our checkpoint never is.
 */
async function assertOursOrAbsent(file: string, id: string): Promise<void> {
  const read = await readManifest(file);
  if (!read || "problem" in read) return;
  if (!isCheckpoint(read.pod) || podId(read.pod) !== id) throw new ForeignManifestError(file, id);
}

/**
 * Writes a manifest into `dir`, creating the directory only when the write finds it missing:
 * checking it before every write costs a file system call per checkpoint and pass.
 */
async function writeManifest(
  dir: string,
  path: string,
  data: string | Uint8Array,
  id: string,
): Promise<WriteOutcome> {
  await assertOursOrAbsent(path, id);
  try {
    return await atomicWrite(path, data, { mode: MANIFEST_MODE });
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  await ensureDir(dir, DIR_MODE);
  return await atomicWrite(path, data, { mode: MANIFEST_MODE });
}

/** Stores a sanitized checkpoint as `<inactiveDir>/<ns>-<name>.json`. */
export async function writeInactiveManifest(paths: ManifestPaths, pod: Pod): Promise<WriteOutcome> {
  const { inactiveManifest } = checkpointPaths(paths, podId(pod));
  return await writeManifest(paths.inactiveDir, inactiveManifest, renderManifest(pod), podId(pod));
}

/** Hands a checkpoint to the kubelet: its inactive manifest, copied only when different. */
export async function activateCheckpoint(
  paths: ManifestPaths,
  id: string,
): Promise<WriteOutcome | "no-inactive-manifest"> {
  const { inactiveManifest, activeManifest } = checkpointPaths(paths, id);
  let manifest: Uint8Array;
  try {
    manifest = await Deno.readFile(inactiveManifest);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return "no-inactive-manifest";
    throw e;
  }
  return await writeManifest(paths.staticPodDir, activeManifest, manifest, id);
}

/** Withdraws a checkpoint from the kubelet. */
export async function deactivateCheckpoint(
  paths: ManifestPaths,
  id: string,
): Promise<"removed" | "absent"> {
  const { activeManifest } = checkpointPaths(paths, id);
  await assertOursOrAbsent(activeManifest, id);
  return await removeDurably(activeManifest);
}

/**
 * Deletes everything of one checkpoint: its secrets and configmaps (and their namespace's
 * directory once no other pod's files are in it), its inactive manifest, then its active manifest
 * last (DESIGN §2.4 step 5). Until the last step a manifest is left for the next pass to find, so
 * a crash midway ends in a removal finished later, never in files nobody tracks. Returns the
 * paths that existed and are gone. Removals run after a pass has written every checkpoint, so no
 * write into a namespace directory races with its removal.
 */
export async function removeCheckpoint(paths: ManifestPaths, id: string): Promise<string[]> {
  const p = checkpointPaths(paths, id);
  // Checked first, so that a refusal leaves the checkpoint whole rather than half removed.
  await assertOursOrAbsent(p.inactiveManifest, id);
  await assertOursOrAbsent(p.activeManifest, id);
  const removed: string[] = [];
  for (const dir of [p.secretsDir, p.configmapsDir]) {
    if (await removeTree(dir) === "removed") removed.push(dir);
    if (await removeIfEmpty(dirname(dir)) === "removed") removed.push(dirname(dir));
  }
  for (const file of [p.inactiveManifest, p.activeManifest]) {
    if (await removeDurably(file) === "removed") removed.push(file);
  }
  return removed;
}
