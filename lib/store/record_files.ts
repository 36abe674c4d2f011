/**
 * Reading a store directory without changing it: every entry that is not a dot-file must be a
 * valid record whose file name matches its key. Used by the stores when they load and by
 * `ckpt-agent verify`, which must never move or delete anything.
 */
import { basename, join } from "node:path";
import { decodeRecord, RecordError, type RecordKind } from "./envelope.ts";
import { mapConcurrent } from "../util/map_concurrent.ts";
import type { Schema } from "../core/schema.ts";

/** What a store needs to know to read and name one kind of record. */
export interface RecordType<T> {
  kind: RecordKind;
  /** Its directory under the state directory. */
  dir: string;
  schema: Schema<T>;
  /** The file name of a key; throws InvalidIdError for a key that cannot be stored. */
  fileNameOf(key: string): string;
  /** Whether a file name is one we write, of some key. */
  isFileName(fileName: string): boolean;
  /** The key a record says it belongs to: its file must be that key's. */
  keyOfRecord(record: T): string;
}

export type RecordEntry<T> =
  & { name: string; path: string }
  & ({ key: string; record: T; error?: undefined } | { error: RecordError });

/** Files read at once: enough to hide the latency of each read, few enough to be polite. */
const READS_IN_FLIGHT = 32;

/** Reads and verifies one record file; a RecordError says what is wrong with it. */
export async function readRecordFile<T>(
  type: RecordType<T>,
  path: string,
): Promise<{ key: string; record: T }> {
  const name = basename(path);
  if (!type.isFileName(name)) {
    throw new RecordError(path, "bad-name", `not a ${type.kind} record file name`);
  }
  let bytes: Uint8Array;
  try {
    bytes = await Deno.readFile(path);
  } catch (e) {
    throw new RecordError(path, "unreadable", `cannot read: ${(e as Error).message}`);
  }
  const record = decodeRecord(path, bytes, type.kind, type.schema);
  // The name may be shortened (a long id's): the key is the record's, filed under its own name.
  const key = type.keyOfRecord(record);
  const own = type.fileNameOf(key);
  if (own !== name) {
    throw new RecordError(
      path,
      "misplaced",
      `holds the record of ${JSON.stringify(key)}, whose file is ${JSON.stringify(own)}`,
    );
  }
  return { key, record };
}

async function readEntry<T>(
  type: RecordType<T>,
  dir: string,
  entry: Deno.DirEntry,
): Promise<RecordEntry<T>> {
  const path = join(dir, entry.name);
  if (!entry.isFile) {
    return {
      name: entry.name,
      path,
      error: new RecordError(path, "not-a-file", "not a regular file"),
    };
  }
  try {
    return { name: entry.name, path, ...await readRecordFile(type, path) };
  } catch (e) {
    if (!(e instanceof RecordError)) throw e;
    return { name: entry.name, path, error: e };
  }
}

/**
 * Every entry of a store directory but dot-files (ours are temp files), sorted by name; none
 * when the directory is a link, which is never followed (docs/design.md#no-links).
 */
export async function readRecordDir<T>(
  type: RecordType<T>,
  dir: string,
): Promise<RecordEntry<T>[]> {
  const entries: Deno.DirEntry[] = [];
  try {
    if ((await Deno.lstat(dir)).isSymlink) return [];
    for await (const entry of Deno.readDir(dir)) {
      if (!entry.name.startsWith(".")) entries.push(entry);
    }
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return [];
    throw e;
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return await mapConcurrent(entries, READS_IN_FLIGHT, (entry) => readEntry(type, dir, entry));
}
