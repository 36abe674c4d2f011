/**
 * The secrets and configmaps the checkpoints need, each followed by a watch of its own
 * (`fieldSelector=metadata.name=<name>` on its namespace's collection), as the kubelet's
 * watch-based manager follows those of its pods: a watched object in sync is known without a
 * request, and a change to it is heard within the watch's latency. Which objects are watched is
 * what the pass says it needs, nothing more: the others' watches are closed.
 *
 * An object the pass has just fetched (a GET) is watched from that answer, without a list: its
 * watch starts from a version at which the object was as the GET found it (lib/sources/
 * list_watch.ts, `seed`), so setting up a watch costs one request, as the kubelet's do.
 */
import type { Listed, ListWatch } from "./list_watch.ts";

export type ObjectKind = "secret" | "configMap";

export interface ObjectRef {
  kind: ObjectKind;
  namespace: string;
  name: string;
}

/** A watched object as its list or watch gave it: its version and its data as files. */
export interface WatchedObject {
  name: string;
  version: string;
  files: Record<string, Uint8Array>;
}

/** The version of an object the API server says does not exist. */
export const ABSENT = "absent";

function refKey(ref: ObjectRef): string {
  return `${ref.kind}/${ref.namespace}/${ref.name}`;
}

export class ObjectWatches {
  readonly #watches = new Map<string, ListWatch<WatchedObject>>();
  /** What GETs found of objects not watched yet, for their watches to start from. */
  readonly #fetched = new Map<string, Listed<WatchedObject>>();
  readonly #start: (ref: ObjectRef, seed?: Listed<WatchedObject>) => ListWatch<WatchedObject>;

  constructor(start: (ref: ObjectRef, seed?: Listed<WatchedObject>) => ListWatch<WatchedObject>) {
    this.#start = start;
  }

  /**
   * A GET found the object as `found` (null: it does not exist) at a version at least as new
   * as `version`: when the object is to be watched next, its watch starts from there. Kept
   * only until the next `watchOnly`; an object watched already is followed by its watch.
   */
  fetched(ref: ObjectRef, found: WatchedObject | null, version: string): void {
    const key = refKey(ref);
    if (this.#watches.has(key)) return;
    this.#fetched.set(key, { items: found ? [found] : [], resourceVersion: version });
  }

  /** The object as its watch knows it, "absent", or undefined: not watched, or not in sync. */
  files(ref: ObjectRef): Record<string, Uint8Array> | typeof ABSENT | undefined {
    const known = this.#watches.get(refKey(ref))?.item(ref.name);
    return known === null ? ABSENT : known?.files;
  }

  /** Its resourceVersion, "absent", or undefined: not watched, or not in sync. */
  version(ref: ObjectRef): string | undefined {
    const known = this.#watches.get(refKey(ref))?.item(ref.name);
    return known === null ? ABSENT : known?.version;
  }

  /** Watches these objects from now on, and no other. */
  watchOnly(refs: Iterable<ObjectRef>): void {
    const wanted = new Map([...refs].map((ref) => [refKey(ref), ref]));
    for (const [key, watch] of this.#watches) {
      if (wanted.has(key)) continue;
      watch.close();
      this.#watches.delete(key);
    }
    for (const [key, ref] of wanted) {
      if (!this.#watches.has(key)) this.#watches.set(key, this.#start(ref, this.#fetched.get(key)));
    }
    this.#fetched.clear();
  }

  /** Every object is watched again at once from its last version. */
  rewatchAll(): void {
    for (const watch of this.#watches.values()) watch.rewatch();
  }

  /** How many objects are watched (or tried). */
  get size(): number {
    return this.#watches.size;
  }

  close(): void {
    for (const watch of this.#watches.values()) watch.close();
    this.#watches.clear();
    this.#fetched.clear();
  }
}
