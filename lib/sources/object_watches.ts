/**
 * The secrets and configmaps the checkpoints need, each followed by a watch of its own
 * (`fieldSelector=metadata.name=<name>` on its namespace's collection), as the kubelet's
 * watch-based manager follows those of its pods: a watched object in sync is known without a
 * request, and a change to it is heard within the watch's latency. Which objects are watched is
 * what the pass says it needs, nothing more: the others' watches are closed.
 */
import type { ListWatch } from "./list_watch.ts";

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
  readonly #start: (ref: ObjectRef) => ListWatch<WatchedObject>;

  constructor(start: (ref: ObjectRef) => ListWatch<WatchedObject>) {
    this.#start = start;
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
      if (!this.#watches.has(key)) this.#watches.set(key, this.#start(ref));
    }
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
  }
}
