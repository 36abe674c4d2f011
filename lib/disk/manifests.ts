/**
 * Checkpoint manifests on disk: reading the kubelet's static-pod directory and the inactive
 * directory, and the writes of a pass's apply step. A checkpoint's manifest has one of the two
 * names of its id (lib/core/checkpoint_layout.ts; which one, lib/core/manifest_names.ts decides
 * and the caller passes down); only such files are ever written (over nothing, the same checkpoint, or a file
 * too damaged to parse) or deleted (only while they hold that checkpoint). Every other file is
 * read, maybe reported, never touched.
 */
import { basename, dirname, join } from "node:path";
import { parse as parseYaml } from "yaml";
import {
  checkpointPaths,
  type CheckpointTrees,
  DIR_MODE,
  MANIFEST_MODE,
  manifestFileNames,
  validId,
  versionsDir,
} from "../core/checkpoint_layout.ts";
import { parseValidId } from "../core/ids.ts";
import { assignManifestNames, type ManifestIndex } from "../core/manifest_names.ts";
import { checkpointIdOf, isCheckpoint, type Pod, PodSchema } from "../core/pod.ts";
import { formatSchemaError } from "../core/schema_error.ts";
import { check } from "../core/schema.ts";
import {
  atomicLink,
  atomicWrite,
  equalBytes,
  removeDurably,
  type WriteOutcome,
} from "./atomic_write.ts";
import { mapConcurrent } from "../util/map_concurrent.ts";
import { ensureDir, removeIfEmpty, removeOwnTree } from "./dirs.ts";
import { lstatOrUndefined, ParsedFiles } from "./verified_files.ts";
import { removeVersionsDir } from "./versions.ts";

export interface ManifestFile {
  /** Full path of the file the pod was read from. */
  file: string;
  pod: Pod;
  /** Named by one of the two names of the pod's own valid id: a file this agent may write. */
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
  const result = check(PodSchema, doc);
  if (!result.success) {
    return { file, problem: `not a pod: ${formatSchemaError(PodSchema, result.issues)}` };
  }
  const id = checkpointIdOf(result.output);
  const ours = parseValidId(id) !== undefined && manifestFileNames(id).includes(basename(file));
  return { file, pod: result.output, ours };
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

/** What a directory holds, for the name rule: each file's name and the checkpoint it holds. */
export function manifestIndex(dir: ManifestDir): ManifestIndex {
  const index = new Map<string, string | undefined>();
  for (const m of dir.manifests) {
    index.set(basename(m.file), isCheckpoint(m.pod) ? checkpointIdOf(m.pod) : undefined);
  }
  for (const p of dir.problems) index.set(basename(p.file), undefined);
  return index;
}

/** The file name of every checkpoint whose manifest is on disk, read without writing anything. */
export async function manifestFilesOnDisk(paths: CheckpointTrees): Promise<Map<string, string>> {
  const [active, inactive] = await Promise.all([
    readManifestDir(paths.staticPodDir),
    readManifestDir(paths.inactiveDir),
  ]);
  const listing = { active: manifestIndex(active), inactive: manifestIndex(inactive) };
  return assignManifestNames([], listing).names;
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
  if (!isCheckpoint(read.pod) || checkpointIdOf(read.pod) !== id) {
    throw new ForeignManifestError(file, id);
  }
}

/**
 * Runs a write into `dir`, creating the directory only when the write finds it missing: checking
 * it before every write costs a file system call per checkpoint and pass.
 */
async function intoDir<T>(dir: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  await ensureDir(dir, DIR_MODE);
  return await write();
}

/** Stores a sanitized checkpoint in the inactive dir, as `file` (assignManifestNames). */
export async function writeInactiveManifest(
  paths: CheckpointTrees,
  pod: Pod,
  file: string,
): Promise<WriteOutcome> {
  const id = checkpointIdOf(pod);
  const { inactiveManifest } = checkpointPaths(paths, id, file);
  await assertOursOrAbsent(inactiveManifest, id);
  return await intoDir(
    paths.inactiveDir,
    () => atomicWrite(inactiveManifest, renderManifest(pod), { mode: MANIFEST_MODE }),
  );
}

/**
 * Whether the active manifest (`info`) already is the inactive one (`source`): one file, or
 * equal.
 */
async function isActive(
  active: string,
  info: Deno.FileInfo,
  inactive: string,
  source: Deno.FileInfo,
) {
  if (!info.isFile) return false;
  if (info.dev === source.dev && info.ino === source.ino) return true;
  if (info.size !== source.size || info.mode === null) return false;
  if ((info.mode & 0o7777) !== MANIFEST_MODE) return false;
  const [a, b] = await Promise.all([Deno.readFile(active), Deno.readFile(inactive)]);
  return equalBytes(a, b);
}

/**
 * Hands a checkpoint to the kubelet under `file`, its inactive manifest's name, only when the
 * active manifest is not that already: as a hard link to the inactive manifest, or as a copy
 * when the two directories are on different file systems (atomicLink). A link needs no free
 * space, so a checkpoint is activated on a full disk.
 *
 * What sharing one inode means: the inactive manifest is only ever replaced by a rename
 * (atomicWrite), never written in place, so the active name keeps the content it was linked
 * with until a pass links it again, as a copy would; neither name is ever chmodded or chowned in
 * place, so both keep the MANIFEST_MODE root-owned file atomicWrite made; withdrawing unlinks the active
 * name only. Linking and unlinking change the inode's ctime, so the inactive manifest is read
 * again once by the caches that key on its stat (verified_files.ts).
 *
 * `syncDirectory: false`: a link is durable only once the caller has fsynced the static-pod dir
 * (converge.ts does, once for every checkpoint it starts).
 */
export async function activateCheckpoint(
  paths: CheckpointTrees,
  id: string,
  file: string,
  syncDirectory = true,
): Promise<WriteOutcome | "no-inactive-manifest"> {
  const { inactiveManifest, activeManifest } = checkpointPaths(paths, id, file);
  // In place, as atomicLink's link is: a failover makes these calls for every checkpoint at once.
  const source = lstatOrUndefined(inactiveManifest);
  if (!source) return "no-inactive-manifest";
  if (!source.isFile) throw new Error(`${inactiveManifest} is not a regular file`);
  const active = lstatOrUndefined(activeManifest);
  if (active) {
    if (await isActive(activeManifest, active, inactiveManifest, source)) return "unchanged";
    await assertOursOrAbsent(activeManifest, id);
  }
  await intoDir(
    paths.staticPodDir,
    () => atomicLink(inactiveManifest, activeManifest, { mode: MANIFEST_MODE }, syncDirectory),
  );
  return "written";
}

/** Whether `file` holds a checkpoint of `id`: a file of ours to delete. */
async function holdsCheckpoint(file: string, id: string): Promise<boolean> {
  const read = await readManifest(file);
  return read !== undefined && !("problem" in read) && isCheckpoint(read.pod) &&
    checkpointIdOf(read.pod) === id;
}

/**
 * Deletes `id`'s manifests in `dir` under either of its names, but `keep`; returns the paths.
 * `syncDirectory` as removeDurably's.
 */
async function removeManifests(
  dir: string,
  id: string,
  keep?: string,
  syncDirectory = true,
): Promise<string[]> {
  validId(id);
  const removed: string[] = [];
  for (const name of manifestFileNames(id)) {
    const file = join(dir, name);
    if (name === keep || !await holdsCheckpoint(file, id)) continue;
    if (await removeDurably(file, syncDirectory) === "removed") removed.push(file);
  }
  return removed;
}

/** The name under which the static-pod dir holds this checkpoint, if it does: it is active. */
export async function activeManifestFile(
  paths: CheckpointTrees,
  id: string,
): Promise<string | undefined> {
  for (const name of manifestFileNames(id)) {
    if (await holdsCheckpoint(join(paths.staticPodDir, name), id)) return name;
  }
  return undefined;
}

/**
 * Withdraws a checkpoint from the kubelet: its active manifest under either name, but `keep`
 * (an activation's own name, when a copy under the other name is left over). A file there that
 * holds anything else is not ours and stays. `syncDirectory: false`: the withdrawal is durable
 * only once the caller has fsynced the static-pod dir (converge.ts does, once for every
 * checkpoint it stops).
 */
export async function deactivateCheckpoint(
  paths: CheckpointTrees,
  id: string,
  keep?: string,
  syncDirectory = true,
): Promise<"removed" | "absent"> {
  const removed = await removeManifests(paths.staticPodDir, id, keep, syncDirectory);
  return removed.length > 0 ? "removed" : "absent";
}

/**
 * Deletes everything of one checkpoint, each manifest under either name and only while it holds
 * this checkpoint: its active manifest first (the kubelet stops running the copy), then its
 * inactive manifest and its versions, and only then its secrets and configmaps of every version
 * (and their namespace's directory once no other pod's files are in it). No manifest is ever
 * left without its files: a crash midway leaves at worst files nobody mounts, which a removal
 * run again (the next purge, or the garbage collection of a checkpoint still tracked) deletes.
 * Returns the paths that existed and are gone. Removals run after a pass has written every
 * checkpoint, so no write into a namespace directory races with its removal.
 */
export async function removeCheckpoint(paths: CheckpointTrees, id: string): Promise<string[]> {
  const p = checkpointPaths(paths, id);
  const removed: string[] = [];
  removed.push(...await removeManifests(paths.staticPodDir, id));
  removed.push(...await removeManifests(paths.inactiveDir, id));
  if (await removeVersionsDir(paths, id) === "removed") removed.push(versionsDir(paths, id));
  for (
    const [root, dir] of [[paths.secretsDir, p.secretsDir], [paths.configmapsDir, p.configmapsDir]]
  ) {
    if (await removeOwnTree(root, dir) === "removed") removed.push(dir);
    if (await removeIfEmpty(dirname(dir)) === "removed") removed.push(dirname(dir));
  }
  return removed;
}
