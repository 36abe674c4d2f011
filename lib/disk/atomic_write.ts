/**
 * The one write path for every file the agent writes (docs/design.md#atomic-writes): a temp file
 * in the same directory, created exclusively with a leading dot (the kubelet ignores dot-files in
 * its static-pod directory), written with its final mode, fsynced, chowned when asked, renamed
 * over the target, then the directory fsynced. A crash at any instant leaves either the old file
 * or the new one, never a torn or empty one. atomicLink puts an existing file under a second name
 * without writing its content again: straight under a new name, the same way over an old one.
 */
import { basename, dirname, join } from "node:path";
import { TEMP_MARKER } from "../core/checkpoint_layout.ts";
import { MAX_NAME_BYTES } from "../core/ids.ts";

export { TEMP_MARKER };

export type WriteOutcome = "written" | "unchanged";

export interface WriteOptions {
  /** Final permission bits, e.g. 0o600. Applied exactly, whatever the umask. */
  mode: number;
  /** Owner to set; a uid without a gid sets the group to the same number. */
  uid?: number;
  gid?: number;
}

function groupOf(opts: WriteOptions): number | undefined {
  return opts.uid === undefined ? undefined : opts.gid ?? opts.uid;
}

/** The longest prefix of `text` that fits in `maxBytes` of UTF-8, cut between characters. */
function truncateUtf8(text: string, maxBytes: number): string {
  const encoder = new TextEncoder();
  if (encoder.encode(text).length <= maxBytes) return text;
  let out = "", bytes = 0;
  for (const char of text) {
    bytes += encoder.encode(char).length;
    if (bytes > maxBytes) break;
    out += char;
  }
  return out;
}

/**
 * A fresh temp path next to `path`: `.<name>.ckpt-tmp-<random>`. The name part is shortened when
 * needed so that a target with the longest allowed name still gets a valid temp name; the sweep
 * only looks at the leading dot and the marker, so the shortened form is still swept.
 */
export function tempPathFor(path: string): string {
  const random = Array.from(crypto.getRandomValues(new Uint8Array(8)))
    .map((b) => b.toString(16).padStart(2, "0")).join("");
  return join(dirname(path), withSuffix(`.${basename(path)}`, `${TEMP_MARKER}${random}`));
}

/** `<name><suffix>`, the name cut short as needed for the whole to fit in NAME_MAX. */
export function withSuffix(name: string, suffix: string): string {
  const room = MAX_NAME_BYTES - new TextEncoder().encode(suffix).length;
  return `${truncateUtf8(name, room)}${suffix}`;
}

function bytesOf(data: Uint8Array | string): Uint8Array {
  return typeof data === "string" ? new TextEncoder().encode(data) : data;
}

export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

async function isCurrent(path: string, data: Uint8Array, opts: WriteOptions): Promise<boolean> {
  try {
    const info = await Deno.lstat(path);
    if (!info.isFile || info.size !== data.length) return false;
    if (info.mode === null || (info.mode & 0o7777) !== opts.mode) return false;
    if (opts.uid !== undefined && (info.uid !== opts.uid || info.gid !== groupOf(opts))) {
      return false;
    }
    return equalBytes(await Deno.readFile(path), data);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}

let bytesWritten = 0;

/**
 * Every byte this process has written through the one write path: what a pass wrote is the
 * difference across it (passes run one at a time), whatever module wrote it.
 */
export function totalBytesWritten(): number {
  return bytesWritten;
}

/**
 * `promise`, with `path` added to the message of its error when the error does not name it:
 * Deno names the path for calls that take one, not for calls on an open file (a write failing
 * with "No space left on device (os error 28)"), and an operator must see which file failed.
 * The error keeps its class and code.
 */
async function withPath<T>(op: string, path: string, promise: Promise<T>): Promise<T> {
  try {
    return await promise;
  } catch (e) {
    if (e instanceof Error && !e.message.includes(path)) e.message += `: ${op} '${path}'`;
    throw e;
  }
}

async function fsyncDir(dir: string): Promise<void> {
  const handle = await Deno.open(dir, { read: true });
  try {
    await withPath("fsync", dir, handle.sync());
  } finally {
    handle.close();
  }
}

/** Per directory: its fsync under way, and the one queued behind it that later calls share. */
const dirFsyncs = new Map<string, { running: Promise<void>; queued?: Promise<void> }>();

function startDirFsync(dir: string): Promise<void> {
  const entry = { running: fsyncDir(dir) };
  dirFsyncs.set(dir, entry);
  const done = () => {
    if (dirFsyncs.get(dir) === entry) dirFsyncs.delete(dir);
  };
  entry.running.then(done, done);
  return entry.running;
}

const ignore = () => {};

/**
 * fsync a directory, so that a rename or unlink in it survives a power cut. A call made while
 * an fsync of the same directory runs waits for one started after that one ends, shared by every
 * call made meanwhile: it started after each of them was made, so it covers what each changed
 * before calling, and checkpoints or records written at once into one directory (the inactive
 * dir, the status store) wait on a few fsyncs of it rather than one each.
 */
export function syncDir(dir: string): Promise<void> {
  const underWay = dirFsyncs.get(dir);
  if (underWay === undefined) return startDirFsync(dir);
  return underWay.queued ??= underWay.running.then(ignore, ignore).then(() => startDirFsync(dir));
}

/**
 * Who makes the directory entry of a rename, link, unlink or mkdir durable: the call itself
 * (true), its caller (false), or a DirSyncs its caller flushes.
 */
export type DirSync = boolean | DirSyncs;

/**
 * Directories owed an fsync for entries already changed in them (renames, links, unlinks,
 * mkdirs), fsynced once each, all at once, by `flush`: the files of one piece of work (a
 * checkpoint's versions, a version's stored files) share their directories' fsyncs, and nothing
 * of that work may be told done before its flush.
 */
export class DirSyncs {
  readonly #dirs = new Set<string>();

  /** The directory holding `path` is owed an fsync. */
  owe(path: string) {
    this.#dirs.add(dirname(path));
  }

  /**
   * The directory `dir` was removed (empty): its own fsync is no longer owed (there is nothing
   * left to fsync), its parent's is, which makes the removal durable with all it held.
   */
  removed(dir: string) {
    this.#dirs.delete(dir);
    this.owe(dir);
  }

  async flush(): Promise<void> {
    const dirs = [...this.#dirs];
    this.#dirs.clear();
    const failed = (await Promise.allSettled(dirs.map(syncDir)))
      .find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed) throw failed.reason;
  }
}

/** Makes the entry of `path` in its directory durable, or leaves that to `sync`. */
export async function syncEntry(path: string, sync: DirSync): Promise<void> {
  if (sync === true) await syncDir(dirname(path));
  else if (sync instanceof DirSyncs) sync.owe(path);
}

/**
 * Runs `work` with a DirSyncs, then flushes it: also when `work` fails (its error wins), since a
 * file renamed into place before the failure would otherwise never be made durable: a later
 * write finding it as wanted leaves it be.
 */
export async function withDirSyncs<T>(work: (syncs: DirSyncs) => Promise<T>): Promise<T> {
  const syncs = new DirSyncs();
  let result: T;
  try {
    result = await work(syncs);
  } catch (e) {
    await syncs.flush().catch(ignore);
    throw e;
  }
  await syncs.flush();
  return result;
}

/**
 * Writes `data` to `path` atomically and durably; skips the write when nothing would change.
 * `sync`: who fsyncs the directory after the rename (DirSync); the file itself is fsynced here.
 */
export async function atomicWrite(
  path: string,
  data: Uint8Array | string,
  opts: WriteOptions,
  sync: DirSync = true,
): Promise<WriteOutcome> {
  const bytes = bytesOf(data);
  if (await isCurrent(path, bytes, opts)) return "unchanged";
  const temp = tempPathFor(path);
  const file = await Deno.open(temp, { createNew: true, write: true, mode: opts.mode });
  await renameOver(temp, path, async () => {
    try {
      let written = 0;
      while (written < bytes.length) {
        written += await withPath("write", path, file.write(bytes.subarray(written)));
      }
      bytesWritten += written;
      if (opts.uid !== undefined) await Deno.chown(temp, opts.uid, groupOf(opts)!);
      // After the chown, which clears set-id bits, and exactly: the create mode went through the
      // umask.
      await Deno.chmod(temp, opts.mode);
      await withPath("fsync", path, file.sync());
    } finally {
      file.close();
    }
  }, sync);
  return "written";
}

/**
 * Finishes `temp` with `prepare`, renames it over `path` and fsyncs the directory as `sync`
 * says; when anything fails before the rename, `temp` is removed, so no failure (a full disk)
 * leaves one behind.
 */
async function renameOver(
  temp: string,
  path: string,
  prepare: () => Promise<void>,
  sync: DirSync,
) {
  let renamed = false;
  try {
    await prepare();
    await Deno.rename(temp, path);
    renamed = true;
    await syncEntry(path, sync);
  } finally {
    if (!renamed) await Deno.remove(temp).catch(() => {});
  }
}

/** Why a hard link cannot be made where a copy can: another file system, or none of links. */
const NO_LINK_CODES = new Set(["EXDEV", "EPERM", "EOPNOTSUPP", "ENOTSUP", "EMLINK"]);

function cannotLink(e: unknown): boolean {
  return NO_LINK_CODES.has((e as { code?: string }).code ?? "");
}

/** Whether `path` is `source` under another name; false if either is gone meanwhile. */
function isLinkOf(path: string, source: string): boolean {
  try {
    const a = Deno.lstatSync(path), b = Deno.statSync(source);
    return a.ino === b.ino && a.dev === b.dev;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}

/**
 * Makes `target` name the file `source` names, atomically and durably. A target that does not
 * exist is linked straight to its name: link(2) makes the name with the whole file behind it in
 * one step, so no temp name is needed. That first link is made in place (synchronously): a
 * failover links a thousand manifests at once, and each asynchronous call waits for a round
 * trip through Deno's blocking pool while the event loop is at its busiest. A target that
 * exists is replaced: a temp hard link beside it (named as atomicWrite's temp files, so the
 * sweep removes a leftover and the kubelet ignores it), renamed over it; one that is already a
 * link to `source` is left as it is (rename(2) over the same file would do nothing and leave the
 * temp link behind). Then the directory is fsynced. A link takes no data blocks, so this works on
 * a completely full file system. Where no link can be made (`source` on another file system, or
 * one without hard links) the content is copied by atomicWrite with `opts`, which needs the
 * space. `syncDirectory: false`: a link is durable only once the caller has fsynced the target's
 * directory (a copy is durable at once).
 */
export async function atomicLink(
  source: string,
  target: string,
  opts: WriteOptions,
  syncDirectory = true,
): Promise<"linked" | "copied"> {
  const copy = async () => {
    await atomicWrite(target, await Deno.readFile(source), opts);
    return "copied" as const;
  };
  let temp: string | undefined;
  try {
    Deno.linkSync(source, target);
  } catch (e) {
    if (cannotLink(e)) return await copy();
    if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
    if (!isLinkOf(target, source)) temp = tempPathFor(target);
  }
  if (temp === undefined) {
    await syncEntry(target, syncDirectory);
    return "linked";
  }
  try {
    await Deno.link(source, temp);
  } catch (e) {
    if (cannotLink(e)) return await copy();
    throw e;
  }
  await renameOver(temp, target, () => Promise.resolve(), syncDirectory);
  return "linked";
}

/**
 * Deletes a file durably; "absent" when there was nothing to delete. `sync: false`: the deletion
 * is durable only once the caller has fsynced the directory (DirSync).
 */
export async function removeDurably(
  path: string,
  sync: DirSync = true,
): Promise<"removed" | "absent"> {
  try {
    await Deno.remove(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return "absent";
    throw e;
  }
  await syncEntry(path, sync);
  return "removed";
}

function isOurTempFile(entry: Deno.DirEntry): boolean {
  return entry.isFile && entry.name.startsWith(".") && entry.name.includes(TEMP_MARKER);
}

/**
 * Removes leftover temp files of ours (from a crash mid-write) in one directory, then fsyncs the
 * directory: a predecessor killed between its rename and its directory fsync left a rename that
 * is visible but not yet durable, and a later "unchanged" write would never sync it.
 */
export async function sweepTempFiles(dir: string): Promise<string[]> {
  const swept: string[] = [];
  try {
    for await (const entry of Deno.readDir(dir)) if (isOurTempFile(entry)) swept.push(entry.name);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return [];
    throw e;
  }
  for (const name of swept) {
    await Deno.remove(join(dir, name)).catch((e) => {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    });
  }
  await syncDir(dir);
  return swept;
}
