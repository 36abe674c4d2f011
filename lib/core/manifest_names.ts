/**
 * Which file name each checkpoint manifest has. bootkube's name, `<namespace>-<name>.json`, can
 * be shared by two ids (`kube/system-x` and `kube-system/x` are both `kube-system-x.json`); the
 * rule below gives every checkpoint a file of its own, and never changes a name once given:
 *
 * - A checkpoint that has a manifest on disk under one of its two names (checkpoint_layout.ts)
 *   keeps that name: the inactive dir's first, else the static-pod dir's. Nothing is ever
 *   renamed, so nothing flip-flops between passes or across restarts, whichever parent appeared
 *   first.
 * - A checkpoint without one gets bootkube's name, unless that name is held by a file in either
 *   directory that is not its own checkpoint (another id's, a foreign pod, a file that is not a
 *   pod: none of which the agent ever touches) or was given to another id; then it gets
 *   `<namespace>_<name>.json`, which only it can have.
 * - New ids are placed in id order, so two new ids that clash in one pass always resolve the
 *   same way (`kube-system/x` sorts before `kube/system-x` and gets bootkube's name).
 * - An id too long for either name has one shortened name for both (checkpoint_layout.ts),
 *   which only it can have: held by another file, nothing of it is written.
 *
 * Pure, and computed before any write of a pass: two checkpoints written at once can never
 * target one file.
 */
import { manifestFileNames } from "./checkpoint_layout.ts";
import { compareIds, parseValidId } from "./ids.ts";

/**
 * What one manifest directory holds: file name → the id of the checkpoint in it, or undefined
 * for anything else (a foreign pod, a file that is not a pod).
 */
export type ManifestIndex = ReadonlyMap<string, string | undefined>;

/** What both manifest directories hold. */
export interface ManifestListing {
  inactive: ManifestIndex;
  active: ManifestIndex;
}

export interface ManifestNames {
  /** id → the file name of its manifest, the same in both directories. */
  names: Map<string, string>;
  /** Ids placed this pass under the unambiguous name, and why bootkube's was not free. */
  clashes: { id: string; file: string; reason: string }[];
  /** Ids placed this pass with both names held by other files: nothing of theirs is written. */
  blocked: { id: string; reason: string }[];
}

const DIRS = ["inactive", "active"] as const;

const DIR_NAMES: Record<keyof ManifestListing, string> = {
  inactive: "the inactive dir",
  active: "the static-pod dir",
};

/** The files of `index` that hold `id`'s checkpoint under one of its own names, bootkube's first. */
export function filesHolding(index: ManifestIndex, id: string): string[] {
  if (!parseValidId(id)) return [];
  return manifestFileNames(id).filter((file) => index.get(file) === id);
}

/**
 * The name of every checkpoint found on disk (`disk`), and names for `newIds` (the checkpoints
 * this pass writes); ids that are not valid Kubernetes ids are left out.
 */
export function assignManifestNames(
  newIds: Iterable<string>,
  disk: ManifestListing,
): ManifestNames {
  const names = new Map<string, string>();
  const givenTo = new Map<string, string>();
  const give = (id: string, file: string) => {
    names.set(id, file);
    givenTo.set(file, id);
  };
  // Sticky names; a name two ids claim (one in each directory) goes to the inactive dir's.
  for (const dir of DIRS) {
    for (const id of disk[dir].values()) {
      if (id === undefined || names.has(id)) continue;
      const file = filesHolding(disk[dir], id).find((f) => !givenTo.has(f));
      if (file !== undefined) give(id, file);
    }
  }
  /** What holds `file` other than `id`'s own checkpoint; undefined when it is free for `id`. */
  const heldBy = (file: string, id: string): string | undefined => {
    const other = givenTo.get(file);
    if (other !== undefined && other !== id) return `the checkpoint of ${other}`;
    for (const dir of DIRS) {
      if (!disk[dir].has(file)) continue;
      const holds = disk[dir].get(file);
      if (holds === id) continue;
      const what = holds === undefined
        ? "a file that is not a checkpoint"
        : `the checkpoint of ${holds}`;
      return `${what} in ${DIR_NAMES[dir]}`;
    }
    return undefined;
  };
  const clashes: ManifestNames["clashes"] = [];
  const blocked: ManifestNames["blocked"] = [];
  const fresh = [...new Set(newIds)].filter((id) => !names.has(id) && parseValidId(id));
  for (const id of fresh.sort(compareIds)) {
    const [bootkube, unambiguous] = manifestFileNames(id);
    const bootkubeHolder = heldBy(bootkube, id);
    if (bootkubeHolder === undefined) {
      give(id, bootkube);
      continue;
    }
    const reason = `${bootkube} is held by ${bootkubeHolder}`;
    const unambiguousHolder = heldBy(unambiguous, id);
    if (unambiguousHolder === undefined) {
      give(id, unambiguous);
      clashes.push({ id, file: unambiguous, reason });
    } else if (unambiguous === bootkube) {
      blocked.push({ id, reason }); // a shortened name: the id's only one
    } else {
      blocked.push({ id, reason: `${reason}, and ${unambiguous} by ${unambiguousHolder}` });
    }
  }
  return { names, clashes, blocked };
}
