/**
 * A checkpoint's versions on disk (docs/design.md#versions): in its versions directory
 * (versionsDir in lib/core/checkpoint_layout.ts) the manifest of every version kept, the
 * candidate waiting to be promoted and the pin; the stored files of each version in its own
 * directory (versionRoot). The inactive manifest is a copy of one version's manifest, the kept
 * version; which one is read from the files, never remembered elsewhere, so a crash at any
 * point leaves a state this module reads back whole.
 *
 * Every write goes through atomicWrite. The order of a promotion (files, then the version's
 * manifest, then the inactive manifest) is the caller's; what this module guarantees is that a
 * version's stored files are only removed once no version manifest kept and no manifest in
 * either manifest dir mounts them.
 */
import { join } from "node:path";
import * as v from "valibot";
import {
  CANDIDATE_FILE,
  checkpointPaths,
  type CheckpointTrees,
  FIRST_VERSION,
  MANIFEST_MODE,
  originFileName,
  PIN_FILE,
  podFileDirs,
  validId,
  versionFileName,
  versionOfDirName,
  versionOfFileName,
  versionsDir,
  versionsMounted,
} from "../core/checkpoint_layout.ts";
import { checkpointIdOf, isCheckpoint, type Pod, PodSchema } from "../core/pod.ts";
import { formatSchemaError } from "../core/schema_error.ts";
import { check, int, object, type Schema } from "../core/schema.ts";
import {
  atomicWrite,
  type DirSync,
  removeDurably,
  sweepTempFiles,
  withDirSyncs,
  type WriteOutcome,
} from "./atomic_write.ts";
import { forEachSettled } from "../util/map_concurrent.ts";
import { ownedEntries, ownTree, ownTreeState, removeOwnTree, removeTree } from "./dirs.ts";
import { lstatOrUndefined } from "./verified_files.ts";

const Version = v.pipe(int(), v.minValue(FIRST_VERSION));

const CandidateSchema = object({
  version: Version,
  seenAt: v.string(),
  /** Since when, and when last, a pass saw its parent Ready (lib/core/promotion.ts). */
  readySince: v.optional(v.string()),
  lastReadyAt: v.optional(v.string()),
  manifest: PodSchema,
});
export type StoredCandidate = v.InferOutput<typeof CandidateSchema>;

const OriginSchema = object({
  /** When this node made the version (or learnt what it was made from). */
  madeAt: v.string(),
  /** The predecessor's version it was inherited from (lib/core/lineage.ts). */
  inheritedFrom: v.optional(object({ id: v.string(), version: Version })),
  /** The parent it was made from, in its own identity, without status (originParent). */
  parent: PodSchema,
});
export type StoredOrigin = v.InferOutput<typeof OriginSchema>;

const PinSchema = object({ pinnedAt: v.string() });
export type StoredPin = v.InferOutput<typeof PinSchema>;

/** What a checkpoint's versions directory holds. */
export interface StoredVersions {
  /** The version of each kept manifest, ascending, with the manifest's text. */
  versions: { version: number; text: string }[];
  candidate?: StoredCandidate;
  pinned?: StoredPin;
  /** Files there that could not be read as what their names say: reported, left alone. */
  problems: string[];
}

async function readTextOrUndefined(path: string): Promise<string | undefined> {
  try {
    return await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
}

/**
 * A checkpoint's versions directory, when it is the agent's own (ownTreeState) and may be read
 * or changed in place; undefined when it is absent, or when a link or another's directory is
 * in the way, which is not followed (the next write puts a directory of the agent's there).
 */
function ownVersionsDir(
  trees: Pick<CheckpointTrees, "inactiveDir">,
  id: string,
): string | undefined {
  const dir = versionsDir(trees, id);
  return ownTreeState(trees.inactiveDir, dir) === "own" ? dir : undefined;
}

/** A regular file's text in a directory of the agent's; undefined for anything else. */
async function readOwnText(dir: string, name: string): Promise<string | undefined> {
  const path = join(dir, name);
  return lstatOrUndefined(path)?.isFile ? await readTextOrUndefined(path) : undefined;
}

/** Makes the versions directory the agent's (ownTree) before anything is written into it. */
async function ownedVersionsDir(
  trees: Pick<CheckpointTrees, "inactiveDir">,
  id: string,
  sync: DirSync = true,
): Promise<string> {
  const dir = versionsDir(trees, id);
  await ownTree(trees.inactiveDir, dir, undefined, { sync });
  return dir;
}

async function readJsonFile<T>(
  dir: string | undefined,
  name: string,
  schema: Schema<T>,
  problems: string[],
): Promise<T | undefined> {
  if (dir === undefined) return undefined;
  const path = join(dir, name);
  const text = await readOwnText(dir, name);
  if (text === undefined) return undefined;
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    problems.push(`${path}: not JSON: ${(e as Error).message}`);
    return undefined;
  }
  const parsed = check(schema, doc);
  if (parsed.success) return parsed.output;
  problems.push(`${path}: ${formatSchemaError(schema, parsed.issues)}`);
  return undefined;
}

/** Everything in a checkpoint's versions directory; an absent directory holds nothing. */
export async function readStoredVersions(
  trees: Pick<CheckpointTrees, "inactiveDir">,
  id: string,
): Promise<StoredVersions> {
  const dir = versionsDir(trees, id);
  const out: StoredVersions = { versions: [], problems: [] };
  const state = ownTreeState(trees.inactiveDir, dir);
  if (state !== "own") {
    if (state === "foreign") out.problems.push(`${dir}: not a directory of the agent's; not read`);
    return out;
  }
  const numbers: number[] = [];
  try {
    for await (const entry of Deno.readDir(dir)) {
      const version = versionOfFileName(entry.name);
      if (entry.isFile && version !== undefined) numbers.push(version);
    }
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return out;
    throw e;
  }
  for (const version of numbers.sort((a, b) => a - b)) {
    const text = await readOwnText(dir, versionFileName(version));
    if (text !== undefined) out.versions.push({ version, text });
  }
  const candidate = await readJsonFile(dir, CANDIDATE_FILE, CandidateSchema, out.problems);
  const pinned = await readJsonFile(dir, PIN_FILE, PinSchema, out.problems);
  return {
    ...out,
    ...(candidate ? { candidate } : {}),
    ...(pinned ? { pinned } : {}),
  };
}

/** The version whose manifest the inactive manifest (`inactiveText`) is a copy of. */
export function keptVersionOf(stored: StoredVersions, inactiveText: string): number | undefined {
  return stored.versions.findLast((v) => v.text === inactiveText)?.version;
}

/** The number the next new version gets: above every version kept and the candidate's. */
export function nextVersion(stored: StoredVersions, kept: number | undefined): number {
  const numbers = stored.versions.map((v) => v.version);
  if (kept !== undefined) numbers.push(kept);
  return numbers.length === 0 ? FIRST_VERSION : Math.max(...numbers) + 1;
}

async function writeIntoVersionsDir(
  trees: Pick<CheckpointTrees, "inactiveDir">,
  id: string,
  name: string,
  text: string,
): Promise<WriteOutcome> {
  const dir = await ownedVersionsDir(trees, id);
  return await atomicWrite(join(dir, name), text, { mode: MANIFEST_MODE });
}

function originText(origin: StoredOrigin): string {
  return `${JSON.stringify(origin, null, 2)}\n`;
}

function pinText(pin: StoredPin): string {
  return `${JSON.stringify(pin)}\n`;
}

/**
 * Stores a version: what it was made from, its manifest and, when given, the pin. They are
 * written at once and their directory fsynced once: all are durable when this returns, before
 * anything names the version kept. A power cut before then may leave the manifest without its
 * origin (writeOrigin's order is kept in the page cache, not on disk): only a kept version's
 * origin is read, and one kept without it is given one from the parent that runs it, as a
 * version made before origins were kept.
 */
export async function writeVersion(
  trees: Pick<CheckpointTrees, "inactiveDir">,
  id: string,
  version: number,
  files: { origin: StoredOrigin; manifest: string; pin?: StoredPin },
): Promise<void> {
  const writes: [string, string][] = [
    [originFileName(version), originText(files.origin)],
    [versionFileName(version), files.manifest],
  ];
  if (files.pin) writes.push([PIN_FILE, pinText(files.pin)]);
  await withDirSyncs(async (syncs) => {
    const dir = await ownedVersionsDir(trees, id, syncs);
    await forEachSettled(writes, writes.length, async ([name, text]) => {
      await atomicWrite(join(dir, name), text, { mode: MANIFEST_MODE }, syncs);
    });
  });
}

/** Stores version `version`'s manifest: it must be whole before anything names it kept. */
export function writeVersionManifest(
  trees: Pick<CheckpointTrees, "inactiveDir">,
  id: string,
  version: number,
  text: string,
): Promise<WriteOutcome> {
  return writeIntoVersionsDir(trees, id, versionFileName(version), text);
}

/** What version `version` was made from; undefined when unknown (made before origins were kept). */
export async function readOrigin(
  trees: Pick<CheckpointTrees, "inactiveDir">,
  id: string,
  version: number,
): Promise<StoredOrigin | undefined> {
  return await readJsonFile(ownVersionsDir(trees, id), originFileName(version), OriginSchema, []);
}

/** Stores what version `version` was made from: before its manifest, so that both are there. */
export function writeOrigin(
  trees: Pick<CheckpointTrees, "inactiveDir">,
  id: string,
  version: number,
  origin: StoredOrigin,
): Promise<WriteOutcome> {
  return writeIntoVersionsDir(trees, id, originFileName(version), originText(origin));
}

export function writeCandidate(
  trees: Pick<CheckpointTrees, "inactiveDir">,
  id: string,
  candidate: StoredCandidate,
): Promise<WriteOutcome> {
  return writeIntoVersionsDir(trees, id, CANDIDATE_FILE, `${JSON.stringify(candidate, null, 2)}\n`);
}

export async function removeCandidate(
  trees: Pick<CheckpointTrees, "inactiveDir">,
  id: string,
): Promise<"removed" | "absent"> {
  return await removeFromVersionsDir(trees, id, CANDIDATE_FILE);
}

/** Deletes one file of the versions directory; nothing when that is not the agent's own. */
async function removeFromVersionsDir(
  trees: Pick<CheckpointTrees, "inactiveDir">,
  id: string,
  name: string,
): Promise<"removed" | "absent"> {
  const dir = ownVersionsDir(trees, id);
  return dir === undefined ? "absent" : await removeDurably(join(dir, name));
}

export function writePin(
  trees: Pick<CheckpointTrees, "inactiveDir">,
  id: string,
  pin: StoredPin,
): Promise<WriteOutcome> {
  return writeIntoVersionsDir(trees, id, PIN_FILE, pinText(pin));
}

export async function removePin(
  trees: Pick<CheckpointTrees, "inactiveDir">,
  id: string,
): Promise<"removed" | "absent"> {
  return await removeFromVersionsDir(trees, id, PIN_FILE);
}

/** A checkpoint's whole versions directory, for its removal. */
export async function removeVersionsDir(
  trees: Pick<CheckpointTrees, "inactiveDir">,
  id: string,
): Promise<"removed" | "absent"> {
  return await removeOwnTree(trees.inactiveDir, versionsDir(trees, id));
}

/** A stored manifest's pod; undefined when the text is not one. */
export function parseManifestText(text: string): Pod | undefined {
  try {
    const parsed = check(PodSchema, JSON.parse(text));
    return parsed.success ? parsed.output : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Keeps the `keep` newest versions and the kept one (`kept`), and removes the manifests of the
 * others (and what each was made from), then every version's stored files that no manifest left mounts: those of the
 * remaining versions and `inUse` (the texts of the manifests in both manifest dirs). Manifests
 * go first, so a crash midway leaves files nobody names, removed on the next prune, never a
 * manifest without its files. Leftover temp files of the versions directory go too. Returns
 * the versions removed.
 */
export async function pruneVersions(
  trees: CheckpointTrees,
  id: string,
  opts: { keep: number; kept: number; inUse: string[] },
): Promise<number[]> {
  const { namespace, name } = validId(id);
  const stored = await readStoredVersions(trees, id);
  const newest = stored.versions.map((v) => v.version).slice(-opts.keep);
  const removed: number[] = [];
  for (const { version } of stored.versions) {
    if (version === opts.kept || newest.includes(version)) continue;
    await removeFromVersionsDir(trees, id, versionFileName(version));
    await removeFromVersionsDir(trees, id, originFileName(version));
    removed.push(version);
  }
  const mounted = new Set<number>();
  const texts = [
    ...stored.versions.filter((v) => !removed.includes(v.version)).map((v) => v.text),
    ...opts.inUse,
  ];
  for (const text of texts) {
    const pod = parseManifestText(text);
    // A manifest that cannot be read might mount anything: then nothing is removed.
    if (!pod) return removed;
    for (const version of versionsMounted(trees, id, pod)) mounted.add(version);
  }
  const roots = [trees.secretsDir, trees.configmapsDir];
  for (const [i, podDir] of podFileDirs(trees, namespace, name).entries()) {
    await removeUnmountedVersions(roots[i], podDir, mounted);
  }
  const dir = ownVersionsDir(trees, id);
  if (dir !== undefined) await sweepTempFiles(dir);
  return removed;
}

/**
 * Removes the directories of versions in `podDir`, below the configured `root`, that are not
 * `mounted`; every directory walked is the agent's first (ownTree, ownedEntries).
 */
async function removeUnmountedVersions(
  root: string,
  podDir: string,
  mounted: ReadonlySet<number>,
) {
  if (!await ownTree(root, podDir, undefined, { create: false })) return;
  const entries = await ownedEntries(podDir);
  for (const entry of [...entries.dirs, ...entries.others]) {
    const version = versionOfDirName(entry.name) ?? FIRST_VERSION;
    if (!mounted.has(version)) await removeTree(join(podDir, entry.name));
  }
}

/** A checkpoint's kept version, as its inactive manifest and its versions directory say. */
export interface KeptOnDisk {
  /** The inactive manifest's text; undefined when it has none that is its checkpoint. */
  text?: string;
  /** The version it is a copy of. */
  kept?: number;
  stored: StoredVersions;
}

/** What `status` and the admin endpoint show of a checkpoint's versions. */
export interface VersionsView {
  /** The version in place (its inactive manifest's); unset when none matches yet. */
  kept?: number;
  /** Every version kept, ascending. */
  versions: number[];
  /** The predecessor's version the one in place was inherited from (docs/design.md#lineage). */
  inheritedFrom?: StoredOrigin["inheritedFrom"];
  pinned?: StoredPin;
  candidate?: Omit<StoredCandidate, "manifest">;
  problems?: string[];
}

function withoutManifest(candidate: StoredCandidate): Omit<StoredCandidate, "manifest"> {
  const { manifest: _, ...rest } = candidate;
  return rest;
}

/** A checkpoint's versions, read without writing anything. */
export async function versionsView(
  trees: CheckpointTrees,
  id: string,
  file: string,
): Promise<VersionsView> {
  const { inactiveManifest } = checkpointPaths(trees, id, file);
  const [text, stored] = await Promise.all([
    readTextOrUndefined(inactiveManifest),
    readStoredVersions(trees, id),
  ]);
  const kept = text === undefined ? undefined : keptVersionOf(stored, text);
  const inheritedFrom = kept === undefined
    ? undefined
    : (await readOrigin(trees, id, kept))?.inheritedFrom;
  return {
    ...(kept !== undefined ? { kept } : {}),
    versions: stored.versions.map((v) => v.version),
    ...(inheritedFrom ? { inheritedFrom } : {}),
    ...(stored.pinned ? { pinned: stored.pinned } : {}),
    ...(stored.candidate ? { candidate: withoutManifest(stored.candidate) } : {}),
    ...(stored.problems.length > 0 ? { problems: stored.problems } : {}),
  };
}

/**
 * Reads which version is in place. An inactive manifest no version matches (written before
 * versions existed, or edited by hand) is adopted as a version of its own, kept like any
 * other: as the first when there is none yet (its files are then where the first version's
 * are), else as the next. A file there that is not this checkpoint is not adopted.
 */
export async function readKept(
  trees: CheckpointTrees,
  id: string,
  inactiveManifest: string,
): Promise<KeptOnDisk> {
  const [text, stored] = await Promise.all([
    readTextOrUndefined(inactiveManifest),
    readStoredVersions(trees, id),
  ]);
  const pod = text === undefined ? undefined : parseManifestText(text);
  if (text === undefined || !pod || !isCheckpoint(pod) || checkpointIdOf(pod) !== id) {
    return { stored };
  }
  const kept = keptVersionOf(stored, text);
  if (kept !== undefined) return { text, kept, stored };
  const adopted = nextVersion(stored, undefined);
  await writeVersionManifest(trees, id, adopted, text);
  stored.versions.push({ version: adopted, text });
  return { text, kept: adopted, stored };
}

/** The texts of a checkpoint's manifests in both manifest dirs, under `file`. */
export async function manifestTexts(
  trees: CheckpointTrees,
  id: string,
  file: string,
): Promise<string[]> {
  const { inactiveManifest, activeManifest } = checkpointPaths(trees, id, file);
  const texts = await Promise.all([inactiveManifest, activeManifest].map(readTextOrUndefined));
  return texts.filter((t): t is string => t !== undefined);
}
