/**
 * What lineage (lib/core/lineage.ts) reads of the disk: the version in place of each tracked
 * checkpoint that might be a new parent's predecessor, with the parent it was made from, read
 * without writing anything.
 */
import {
  type CheckpointTrees,
  type StoredFileDirs,
  versionFileDirs,
} from "../core/checkpoint_layout.ts";
import { splitId } from "../core/ids.ts";
import { controllerOf, type VersionInPlace } from "../core/lineage.ts";
import type { ManifestNames } from "../core/manifest_names.ts";
import type { Pod } from "../core/pod.ts";
import { parseInstant } from "../core/time.ts";
import { readOrigin, versionsView } from "../disk/versions.ts";

/** What a pass knows of the checkpoints that might be a new parent's predecessors. */
export interface Lineage {
  /** Every checkpoint tracked this pass. */
  tracked: readonly string[];
  /** The parents seen this pass. */
  parents: ReadonlyMap<string, Pod>;
  names: ManifestNames;
}

/**
 * The versions in place, with their origins, of the tracked checkpoints that might be the
 * predecessors of `heir` (`id`): in its namespace, and of a parent that is gone or has the same
 * controller (one seen with another cannot be, and is not read: a node whose parents all appear
 * at once reads nothing). A checkpoint with no version in place yet, or made before origins were
 * kept and not seen since, is no one's predecessor.
 */
export async function versionsInPlace(
  trees: CheckpointTrees,
  heir: Pod,
  id: string,
  lineage: Lineage,
): Promise<VersionInPlace[]> {
  const controller = controllerOf(heir);
  if (!controller) return [];
  const out: VersionInPlace[] = [];
  for (const other of lineage.tracked) {
    const file = lineage.names.names.get(other);
    const seen = lineage.parents.get(other);
    if (
      other === id || file === undefined ||
      splitId(other)?.namespace !== heir.metadata.namespace ||
      (seen && controllerOf(seen)?.uid !== controller.uid)
    ) continue;
    const { kept } = await versionsView(trees, other, file);
    const origin = kept === undefined ? undefined : await readOrigin(trees, other, kept);
    const madeAt = origin && parseInstant(origin.madeAt);
    if (kept === undefined || !origin || madeAt === undefined) continue;
    out.push({ id: other, version: kept, parent: origin.parent, madeAt });
  }
  return out;
}

/**
 * Where `from`'s version holds what a directory of `to`'s version (a volume's, under one of
 * versionFileDirs) holds: the same path under the other version's root.
 */
export function sameDirIn(
  dirs: StoredFileDirs,
  to: { namespace: string; name: string; version: number },
  from: { name: string; version: number },
): (dir: string) => string {
  const toRoots = versionFileDirs(dirs, to.namespace, to.name, to.version);
  const fromRoots = versionFileDirs(dirs, to.namespace, from.name, from.version);
  return (dir) => {
    const i = toRoots.findIndex((root) => dir.startsWith(`${root}/`));
    if (i < 0) throw new Error(`${dir} is not a directory of ${to.name}'s version ${to.version}`);
    return `${fromRoots[i]}${dir.slice(toRoots[i].length)}`;
  };
}
