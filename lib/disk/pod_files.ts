/**
 * The files behind a checkpoint's rewritten volumes (docs/design.md#volumes): secret and configmap
 * keys and rendered downward-API items, written into the hostPath directories the sanitizer chose.
 * What a volume must hold is decided from what was fetched; a volume whose objects could not be
 * fetched keeps the files it has, because nothing is ever deleted on the strength of a failure.
 */
import { isAbsolute, join, normalize } from "node:path";
import {
  type FileAccess,
  type StoredAccess,
  type StoredFileDirs,
  unsafeVolumePath,
  versionFileDirs,
  versionOfDirName,
} from "../core/checkpoint_layout.ts";
import type { FileSource, VolumeFiles } from "../core/sanitize.ts";
import { atomicWrite, type DirSyncs, removeDurably, withDirSyncs } from "./atomic_write.ts";
import { forEachSettled } from "../util/map_concurrent.ts";
import { ownedEntries, ownTree, removeTree } from "./dirs.ts";
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

/** A volume's directory must be a plain path below its configured directory, as the sanitizer
 *  builds them. */
function unsafeDir({ root, dir }: VolumeFiles): boolean {
  return !isAbsolute(dir) || normalize(dir) !== dir || !dir.startsWith(`${root}/`);
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
  if (unsafeDir(volume)) return { skip: `unsafe directory ${JSON.stringify(volume.dir)}` };
  const files = new Map<string, Uint8Array>();
  const refused: string[] = [];
  for (const source of volume.sources) {
    const found = sourceFiles(source, objects);
    if ("skip" in found) return found;
    for (const [path, content] of found) {
      const problem = unsafeVolumePath(path);
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
 * crash mid-write, and anything not a regular file. `dir` is the agent's (ownTree), and so is
 * every directory it goes on into (ownedEntries): a link is removed, never followed.
 */
async function prune(
  dir: string,
  prefix: string,
  files: Map<string, Uint8Array>,
  dirs: Set<string>,
  access: StoredAccess,
  syncs: DirSyncs,
): Promise<number> {
  let removed = 0;
  const entries = await ownedEntries(dir, access.dir);
  for (const entry of entries.dirs) {
    const rel = `${prefix}${entry.name}`, path = join(dir, entry.name);
    removed += await prune(path, `${rel}/`, files, dirs, access, syncs);
    if (!dirs.has(rel)) {
      await Deno.remove(path);
      syncs.removed(path);
    }
  }
  for (const entry of entries.others) {
    const rel = `${prefix}${entry.name}`;
    if (!(entry.isFile && files.has(rel))) {
      if (await removeDurably(join(dir, entry.name), syncs) === "removed") removed++;
    }
  }
  return removed;
}

/** What a stored file is checked against: all that atomicWrite compares. */
function storedKey(content: Uint8Array, file: FileAccess): ContentKey {
  return [`${file.mode} ${file.uid} ${file.gid}`, content];
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
 * written fails the volume once the others are done. Every directory of the volume is the
 * agent's before anything in it is looked at (ownTree, ownedEntries), and no one else may write
 * in it: a file written there lands there.
 */
async function writeVolume(
  volume: VolumeFiles,
  files: Map<string, Uint8Array>,
  access: StoredAccess,
  writes: VolumeWrites,
): Promise<void> {
  const { summary, syncs, verified } = writes;
  const { root, dir } = volume;
  await ownTree(root, dir, access.dir, { sync: syncs });
  const dirs = neededDirs(files.keys());
  summary.removed += await prune(dir, "", files, dirs, access, syncs);
  for (const sub of [...dirs].sort()) {
    await ownTree(dir, join(dir, sub), access.dir, { above: access.dir, sync: syncs });
  }
  await forEachSettled([...files.keys()].sort(), FILES_IN_FLIGHT, async (path) => {
    const content = files.get(path) as Uint8Array, file = join(dir, path);
    const key = verified && storedKey(content, access.file);
    if (key && verified!.unchanged(file, key)) {
      summary.unchanged++;
      summary.trusted++;
      return;
    }
    const outcome = await atomicWrite(file, content, access.file, syncs);
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
  access: StoredAccess,
  verified: VerifiedFiles | undefined,
  work: (writes: VolumeWrites) => Promise<void>,
): Promise<VolumeWriteSummary> {
  const summary = checkedSummary(access);
  const checked: [string, ContentKey][] = [];
  await withDirSyncs((syncs) => work({ summary, syncs, verified, checked }));
  for (const [file, key] of checked) verified?.checked(file, key);
  return summary;
}

function checkedSummary(access: StoredAccess): VolumeWriteSummary {
  for (const id of [access.dir.uid, access.dir.gid, access.file.uid, access.file.gid]) {
    if (!Number.isSafeInteger(id) || id < 0) throw new RangeError(`invalid file owner id ${id}`);
  }
  return { written: 0, unchanged: 0, trusted: 0, removed: 0, bytesWritten: 0, skipped: [] };
}

/** What bounds one call's writes. */
export interface VolumeWriteOptions {
  /** Files found or written whole before: see writeVolume. */
  verified?: VerifiedFiles;
  /**
   * The most the volumes' files may take together (checkpointMaxSize): above it nothing of
   * them is written, and the call throws StoredFilesTooLarge.
   */
  maxBytes?: number;
}

/**
 * The files of a checkpoint's volumes would take more than it may store: one parent mounting
 * large secrets must not fill the disk it shares with the node (often etcd's).
 */
export class StoredFilesTooLarge extends Error {
  override name = "StoredFilesTooLarge";
}

const MIB = 2 ** 20;

function mib(bytes: number): string {
  return `${(bytes / MIB).toFixed(1)} MiB`;
}

/** Throws StoredFilesTooLarge when `files` take more than `maxBytes` together. */
function checkSize(files: [VolumeFiles, Map<string, Uint8Array>][], maxBytes?: number) {
  if (maxBytes === undefined) return;
  const sizes = files.map(([volume, contents]) => ({
    volume: volume.volume,
    bytes: [...contents.values()].reduce((sum, content) => sum + content.length, 0),
  }));
  const total = sizes.reduce((sum, s) => sum + s.bytes, 0);
  if (total <= maxBytes) return;
  const largest = sizes.sort((a, b) => b.bytes - a.bytes).slice(0, 3)
    .map((s) => `volume ${s.volume} ${mib(s.bytes)}`);
  throw new StoredFilesTooLarge(
    `its stored files would take ${mib(total)} (${largest.join(", ")}${
      sizes.length > 3 ? ", …" : ""
    }), more than checkpointMaxSize (${mib(maxBytes)}): none of them is written`,
  );
}

/**
 * Brings every volume directory to what the fetched objects say: files and directories with the
 * owners and modes of `access` (storedAccess), only changed files written, files no longer
 * wanted removed; durable when it returns. An I/O failure is thrown; the volumes before it are
 * done, each file whole or as it was, the volumes after it untouched. `verified`: see
 * writeVolume; it is left remembering only the files these volumes must hold.
 */
export async function writeVolumeFiles(
  volumes: VolumeFiles[],
  objects: ObjectData,
  access: StoredAccess,
  { verified, maxBytes }: VolumeWriteOptions = {},
): Promise<VolumeWriteSummary> {
  const wanted = new Set<string>();
  const summary = await volumeWrites(access, verified, async (writes) => {
    const writable: [VolumeFiles, Map<string, Uint8Array>][] = [];
    for (const volume of volumes) {
      const desired = desiredFiles(volume, objects);
      if ("skip" in desired) {
        writes.summary.skipped.push({ volume: volume.volume, reason: desired.skip });
        continue;
      }
      for (const reason of desired.refused) {
        writes.summary.skipped.push({ volume: volume.volume, reason });
      }
      writable.push([volume, desired.files]);
    }
    checkSize(writable, maxBytes);
    for (const [volume, files] of writable) {
      await writeVolume(volume, files, access, writes);
      for (const path of files.keys()) wanted.add(join(volume.dir, path));
    }
  });
  verified?.retain(wanted);
  return summary;
}

/**
 * The regular files under `dir`, a directory of the agent's below `root`, by path relative to
 * it; undefined when it does not exist. Every directory is the agent's before it is read
 * (ownTree, ownedEntries), so no link leads the copy to a file outside; links and leftover temp
 * files are not copied.
 */
async function readVolumeDir(
  root: string,
  dir: string,
): Promise<Map<string, Uint8Array> | undefined> {
  if (!await ownTree(root, dir, undefined, { create: false })) return undefined;
  const files = new Map<string, Uint8Array>();
  const walk = async (at: string, prefix: string) => {
    const entries = await ownedEntries(at);
    for (const entry of entries.dirs) {
      if (unsafeVolumePath(entry.name) === undefined) {
        await walk(join(at, entry.name), `${prefix}${entry.name}/`);
      }
    }
    for (const entry of entries.others) {
      const rel = `${prefix}${entry.name}`;
      if (entry.isFile && unsafeVolumePath(rel) === undefined) {
        files.set(rel, await Deno.readFile(join(at, entry.name)));
      }
    }
  };
  await walk(dir, "");
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
  access: StoredAccess,
  { maxBytes }: Pick<VolumeWriteOptions, "maxBytes"> = {},
): Promise<VolumeWriteSummary> {
  return volumeWrites(access, undefined, async (writes) => {
    const copies: [VolumeFiles, Map<string, Uint8Array>][] = [];
    for (const volume of volumes) {
      const source = from(volume.dir);
      const files = unsafeDir(volume) ? undefined : await readVolumeDir(volume.root, source);
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
      copies.push([volume, files]);
    }
    checkSize(copies, maxBytes);
    for (const [volume, files] of copies) await writeVolume(volume, files, access, writes);
  });
}

/**
 * Removes what one version's file directories (versionFileDirs) hold beyond its volumes: the
 * files of a secret the pod no longer mounts must not linger until the checkpoint goes. Pass
 * every volume of the pod, skipped ones included, so their kept files stay kept. The
 * directories of other versions (`_v<n>`, inside the first version's) are never touched here.
 * Every directory walked is the agent's first (ownTree, ownedEntries).
 */
export async function removeStaleVolumeDirs(
  dirs: StoredFileDirs,
  pod: { namespace: string; name: string },
  version: number,
  volumes: VolumeFiles[],
): Promise<string[]> {
  const keep = new Set(volumes.map((v) => v.dir));
  const leadsToKept = (path: string) => [...keep].some((dir) => dir.startsWith(`${path}/`));
  const removed: string[] = [];
  const sweep = async (dir: string, top: boolean) => {
    const entries = await ownedEntries(dir);
    for (const entry of [...entries.dirs, ...entries.others]) {
      const path = join(dir, entry.name);
      if (keep.has(path) || (top && versionOfDirName(entry.name) !== undefined)) continue;
      if (entries.dirs.includes(entry) && leadsToKept(path)) await sweep(path, false);
      else if (await removeTree(path) === "removed") removed.push(path);
    }
  };
  const roots = [dirs.secretsDir, dirs.configmapsDir];
  for (const [i, dir] of versionFileDirs(dirs, pod.namespace, pod.name, version).entries()) {
    if (await ownTree(roots[i], dir, undefined, { create: false })) await sweep(dir, true);
  }
  return removed;
}
