/**
 * The files behind a checkpoint's rewritten volumes (docs/design.md#volumes): secret and configmap
 * keys and rendered downward-API items, written into the hostPath directories the sanitizer chose.
 * What a volume must hold is decided from what was fetched; a volume whose objects could not be
 * fetched keeps the files it has, because nothing is ever deleted on the strength of a failure.
 */
import { dirname, isAbsolute, join, normalize } from "node:path";
import {
  DIR_MODE,
  type FileOwner,
  STORED_FILE_MODE,
  versionOfDirName,
} from "../core/checkpoint_layout.ts";
import type { FileSource, VolumeFiles } from "../core/sanitize.ts";
import {
  atomicWrite,
  type DirSyncs,
  removeDurably,
  TEMP_MARKER,
  withDirSyncs,
} from "./atomic_write.ts";
import { forEachSettled } from "../util/map_concurrent.ts";
import { ensureDir, ensureOwnedDir, removeTree } from "./dirs.ts";
import type { ContentKey, VerifiedFiles } from "./verified_files.ts";

/**
 * What the agent fetched, keyed by `objectKey`: the object's data, or "absent" when the API server
 * said it does not exist. An object missing from the map could not be fetched.
 */
export type ObjectData = Map<string, Record<string, Uint8Array> | "absent">;

export function objectKey(kind: "secret" | "configMap", name: string): string {
  return `${kind}/${name}`;
}

export interface VolumeWriteSummary {
  written: number;
  unchanged: number;
  /** Of the unchanged files, those known unchanged by their stat alone, without reading them. */
  trusted: number;
  removed: number;
  bytesWritten: number;
  /** Volumes left as they were, and single files refused, with why. */
  skipped: { volume: string; reason: string }[];
}

/** NAME_MAX on Linux file systems. */
const MAX_NAME_BYTES = 255;

/** Why a file path inside a volume is refused, or undefined when it is safe. */
function unsafePath(path: string): string | undefined {
  if (path === "") return "empty path";
  if (isAbsolute(path)) return "absolute path";
  if (path.includes("\0")) return "NUL in path";
  for (const segment of path.split("/")) {
    if (segment === "") return "empty path segment";
    // `..` anywhere, and `..data`-style names the kubelet's own atomic writer uses.
    if (segment.startsWith("..") || segment === ".") return `path segment ${segment}`;
    if (segment.startsWith(".") && segment.includes(TEMP_MARKER)) {
      return "name of a temp file of ours";
    }
    if (new TextEncoder().encode(segment).length > MAX_NAME_BYTES) return "name too long";
  }
  return undefined;
}

/** A volume directory must be a plain absolute path, as the sanitizer builds them. */
function unsafeDir(dir: string): boolean {
  return !isAbsolute(dir) || normalize(dir) !== dir || dir.split("/").includes("..");
}

type Desired = { files: Map<string, Uint8Array>; refused: string[] } | { skip: string };

/** A downward-API file, rendered by the sanitizer. */
function literalFile(source: Extract<FileSource, { kind: "literal" }>): [string, Uint8Array] {
  return [source.path, new TextEncoder().encode(source.content)];
}

function sourceFiles(
  source: FileSource,
  objects: ObjectData,
): [string, Uint8Array][] | { skip: string } {
  if (source.kind === "literal") return [literalFile(source)];
  const key = objectKey(source.kind, source.name);
  const data = objects.get(key);
  if (data === undefined) return { skip: `${key} could not be fetched; files kept as they are` };
  if (data === "absent") {
    return source.optional ? [] : { skip: `${key} does not exist and is not optional` };
  }
  if (!source.items) return Object.entries(data);
  const files: [string, Uint8Array][] = [];
  for (const item of source.items) {
    if (Object.hasOwn(data, item.key)) files.push([item.path, data[item.key]]);
    // As the kubelet: a missing key fails a required volume and is left out of an optional one.
    else if (!source.optional) return { skip: `${key} has no key ${item.key}` };
  }
  return files;
}

/** The files one volume must hold, or why it is left alone this pass. */
function desiredFiles(volume: VolumeFiles, objects: ObjectData): Desired {
  if (unsafeDir(volume.dir)) return { skip: `unsafe directory ${JSON.stringify(volume.dir)}` };
  const files = new Map<string, Uint8Array>();
  const refused: string[] = [];
  for (const source of volume.sources) {
    const found = sourceFiles(source, objects);
    if ("skip" in found) return found;
    for (const [path, content] of found) {
      const problem = unsafePath(path);
      if (problem) refused.push(`file ${JSON.stringify(path)} refused: ${problem}`);
      else files.set(path, content);
    }
  }
  // A path cannot be both a file and the directory of another file.
  for (const path of [...files.keys()]) {
    const segments = path.split("/");
    for (let i = 1; i < segments.length; i++) {
      const parent = segments.slice(0, i).join("/");
      if (files.has(parent)) {
        files.delete(path);
        refused.push(`file ${JSON.stringify(path)} refused: ${parent} is a file`);
        break;
      }
    }
  }
  return { files, refused };
}

/** Every directory that holds a desired file, as relative paths. */
function neededDirs(files: Iterable<string>): Set<string> {
  const dirs = new Set<string>();
  for (const path of files) {
    const segments = path.split("/");
    for (let i = 1; i < segments.length; i++) dirs.add(segments.slice(0, i).join("/"));
  }
  return dirs;
}

/**
 * Removes what the volume must no longer hold: keys deleted from their object, leftovers of a
 * crash mid-write, and anything not a regular file. Symlinks are removed, never followed.
 */
async function prune(
  dir: string,
  prefix: string,
  files: Map<string, Uint8Array>,
  dirs: Set<string>,
  syncs: DirSyncs,
): Promise<number> {
  let removed = 0;
  const entries: Deno.DirEntry[] = [];
  for await (const entry of Deno.readDir(dir)) entries.push(entry);
  for (const entry of entries) {
    const rel = `${prefix}${entry.name}`, path = join(dir, entry.name);
    if (entry.isDirectory) {
      removed += await prune(path, `${rel}/`, files, dirs, syncs);
      if (!dirs.has(rel)) {
        await Deno.remove(path);
        syncs.removed(path);
      }
    } else if (!(entry.isFile && files.has(rel))) {
      if (await removeDurably(path, syncs) === "removed") removed++;
    }
  }
  return removed;
}

/** What a stored file is checked against: all that atomicWrite compares. */
function storedKey(content: Uint8Array, owner: FileOwner): ContentKey {
  return [`${STORED_FILE_MODE} ${owner.uid} ${owner.gid}`, content];
}

/**
 * Files of one volume written at once: each write waits on its own fsync, and a volume's files
 * need no order among them.
 */
const FILES_IN_FLIGHT = 8;

/** What several volumes' writes share: their directories' fsyncs, and the files then verified. */
interface VolumeWrites {
  summary: VolumeWriteSummary;
  syncs: DirSyncs;
  /** Files found or written whole before (see writeVolume), if the caller keeps them. */
  verified?: VerifiedFiles;
  /** Files written or found whole, to be marked verified once their directories are synced. */
  checked: [string, ContentKey][];
}

/**
 * `writes.verified`: files found or written whole before, skipped while their stat says no one
 * has touched them since; any other file is read and compared, and rewritten when it differs.
 * The directory entries made are durable once `writes.syncs` is flushed; a file that cannot be
 * written fails the volume once the others are done.
 */
async function writeVolume(
  dir: string,
  files: Map<string, Uint8Array>,
  owner: FileOwner,
  writes: VolumeWrites,
): Promise<void> {
  const { summary, syncs, verified } = writes;
  // Above the volume: the agent's own root-only tree; the volume and below: the pod's user's.
  await ensureDir(dirname(dir), DIR_MODE, syncs);
  await ensureOwnedDir(dir, DIR_MODE, owner, syncs);
  const dirs = neededDirs(files.keys());
  summary.removed += await prune(dir, "", files, dirs, syncs);
  for (const sub of [...dirs].sort()) await ensureOwnedDir(join(dir, sub), DIR_MODE, owner, syncs);
  await forEachSettled([...files.keys()].sort(), FILES_IN_FLIGHT, async (path) => {
    const content = files.get(path) as Uint8Array, file = join(dir, path);
    const key = verified && storedKey(content, owner);
    if (key && verified!.unchanged(file, key)) {
      summary.unchanged++;
      summary.trusted++;
      return;
    }
    const outcome = await atomicWrite(file, content, {
      mode: STORED_FILE_MODE,
      uid: owner.uid,
      gid: owner.gid,
    }, syncs);
    if (key) writes.checked.push([file, key]);
    if (outcome === "written") {
      summary.written++;
      summary.bytesWritten += content.length;
    } else {
      summary.unchanged++;
    }
  });
}

/**
 * Runs `work` on the volumes' shared writes, then fsyncs every directory they changed, once
 * each (withDirSyncs); only then are the files marked verified.
 */
async function volumeWrites(
  owner: FileOwner,
  verified: VerifiedFiles | undefined,
  work: (writes: VolumeWrites) => Promise<void>,
): Promise<VolumeWriteSummary> {
  const summary = checkedSummary(owner);
  const checked: [string, ContentKey][] = [];
  await withDirSyncs((syncs) => work({ summary, syncs, verified, checked }));
  for (const [file, key] of checked) verified?.checked(file, key);
  return summary;
}

function checkedSummary(owner: FileOwner): VolumeWriteSummary {
  for (const id of [owner.uid, owner.gid]) {
    if (!Number.isSafeInteger(id) || id < 0) throw new RangeError(`invalid file owner id ${id}`);
  }
  return { written: 0, unchanged: 0, trusted: 0, removed: 0, bytesWritten: 0, skipped: [] };
}

/**
 * Brings every volume directory to what the fetched objects say: files and directories with the
 * modes of checkpoint_layout.ts, owned by `owner`, only changed files written, files no longer
 * wanted removed; durable when it returns. An I/O failure is thrown; the volumes before it are
 * done, each file whole or as it was, the volumes after it untouched. `verified`: see
 * writeVolume; it is left remembering only the files these volumes must hold.
 */
export async function writeVolumeFiles(
  volumes: VolumeFiles[],
  objects: ObjectData,
  owner: FileOwner,
  verified?: VerifiedFiles,
): Promise<VolumeWriteSummary> {
  const wanted = new Set<string>();
  const summary = await volumeWrites(owner, verified, async (writes) => {
    for (const volume of volumes) {
      const desired = desiredFiles(volume, objects);
      if ("skip" in desired) {
        writes.summary.skipped.push({ volume: volume.volume, reason: desired.skip });
        continue;
      }
      for (const reason of desired.refused) {
        writes.summary.skipped.push({ volume: volume.volume, reason });
      }
      await writeVolume(volume.dir, desired.files, owner, writes);
      for (const path of desired.files.keys()) wanted.add(join(volume.dir, path));
    }
  });
  verified?.retain(wanted);
  return summary;
}

/**
 * The regular files under `dir`, by path relative to it; undefined when it does not exist.
 * Symlinks and leftover temp files are not copied.
 */
async function readVolumeDir(dir: string): Promise<Map<string, Uint8Array> | undefined> {
  const files = new Map<string, Uint8Array>();
  const walk = async (at: string, prefix: string) => {
    for await (const entry of Deno.readDir(at)) {
      const rel = `${prefix}${entry.name}`;
      if (unsafePath(rel) !== undefined) continue;
      if (entry.isDirectory) await walk(join(at, entry.name), `${rel}/`);
      else if (entry.isFile) files.set(rel, await Deno.readFile(join(at, entry.name)));
    }
  };
  try {
    await walk(dir, "");
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
  return files;
}

/**
 * Brings every volume directory to what another version holds for the same volume
 * (`from(volume.dir)`), its downward-API files rendered anew from `volumes`: the files of an
 * inherited version (docs/design.md#lineage), copies of its predecessor's, which it never
 * mounts. A volume the other version has no directory for is skipped.
 */
export function copyVolumeFiles(
  volumes: VolumeFiles[],
  from: (dir: string) => string,
  owner: FileOwner,
): Promise<VolumeWriteSummary> {
  return volumeWrites(owner, undefined, async (writes) => {
    for (const volume of volumes) {
      const source = from(volume.dir);
      const files = unsafeDir(volume.dir) ? undefined : await readVolumeDir(source);
      if (!files) {
        writes.summary.skipped.push({
          volume: volume.volume,
          reason: `nothing to copy at ${source}`,
        });
        continue;
      }
      for (const source of volume.sources) {
        if (source.kind === "literal") files.set(...literalFile(source));
      }
      await writeVolume(volume.dir, files, owner, writes);
    }
  });
}

/**
 * Removes what one version's file directories (versionFileDirs) hold beyond its volumes: the
 * files of a secret the pod no longer mounts must not linger until the checkpoint goes. Pass
 * every volume of the pod, skipped ones included, so their kept files stay kept. The
 * directories of other versions (`_v<n>`, inside the first version's) are never touched here.
 */
export async function removeStaleVolumeDirs(
  podDirs: string[],
  volumes: VolumeFiles[],
): Promise<string[]> {
  const keep = new Set(volumes.map((v) => v.dir));
  const leadsToKept = (path: string) => [...keep].some((dir) => dir.startsWith(`${path}/`));
  const removed: string[] = [];
  const sweep = async (dir: string, top: boolean) => {
    const entries: Deno.DirEntry[] = [];
    try {
      for await (const entry of Deno.readDir(dir)) entries.push(entry);
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) return;
      throw e;
    }
    for (const entry of entries) {
      const path = join(dir, entry.name);
      if (keep.has(path) || (top && versionOfDirName(entry.name) !== undefined)) continue;
      if (entry.isDirectory && leadsToKept(path)) await sweep(path, false);
      else if (await removeTree(path) === "removed") removed.push(path);
    }
  };
  for (const dir of podDirs) await sweep(dir, true);
  return removed;
}
