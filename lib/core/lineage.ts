/**
 * Lineage (docs/design.md#lineage), as pure functions: a controller that replaces a pod by one
 * of a new name (a DaemonSet rollout) makes a new parent, which would otherwise take the new,
 * unproven spec as its first checkpoint. Such a parent has a predecessor: the checkpoint of
 * another parent of the same controller, whose version in place it inherits, re-made for its
 * own identity; its own spec is then a candidate like any other.
 */
import { compareIds } from "./ids.ts";
import { asArray, isObject } from "./json.ts";
import type { Pod } from "./pod.ts";
import type { Instant } from "./time.ts";

/** The controller a pod belongs to: its ownerReference with `controller: true`. */
export interface ControllerRef {
  kind: string;
  uid: string;
}

export function controllerOf(pod: Pod): ControllerRef | undefined {
  const refs = asArray((pod.metadata as { ownerReferences?: unknown }).ownerReferences);
  const ref = refs.find((r) => r.controller === true);
  if (!isObject(ref) || typeof ref.uid !== "string" || ref.uid === "") return undefined;
  return { kind: typeof ref.kind === "string" ? ref.kind : "", uid: ref.uid };
}

/** A tracked checkpoint's version in place, with the parent it was made from. */
export interface VersionInPlace {
  id: string;
  version: number;
  /** The parent this version was made from (its origin), in its own identity. */
  parent: Pod;
  /** When this node made it (or learnt what it was made from). */
  madeAt: Instant;
}

/**
 * The predecessor of `heir` among the checkpoints' versions in place: one of another parent in
 * the same namespace whose controller is the heir's (same uid and kind), unless that is a
 * StatefulSet. Of several, the newest version (the latest `madeAt`), then the smallest id: the
 * same answer on every pass.
 */
export function findPredecessor(
  heir: Pod,
  id: string,
  inPlace: readonly VersionInPlace[],
): VersionInPlace | undefined {
  const controller = controllerOf(heir);
  // A StatefulSet keeps its pods' names across rollouts: a pod of a new name is another
  // replica, with an identity (hostname, claims) of its own, never a replacement.
  if (!controller || controller.kind === "StatefulSet") return undefined;
  const matches = inPlace.filter((v) => {
    const theirs = controllerOf(v.parent);
    return v.id !== id && v.parent.metadata.namespace === heir.metadata.namespace &&
      theirs?.uid === controller.uid && theirs.kind === controller.kind;
  });
  matches.sort((a, b) =>
    a.madeAt > b.madeAt ? -1 : a.madeAt < b.madeAt ? 1 : compareIds(a.id, b.id)
  );
  return matches[0];
}

/**
 * A parent as a version's origin keeps it: what the sanitizer reads, without its status and the
 * server's bookkeeping of field owners, which say nothing about the spec.
 */
export function originParent(parent: Pod): Pod {
  const { status: _, ...pod } = structuredClone(parent);
  const { managedFields: __, ...metadata } = pod.metadata as Pod["metadata"] & {
    managedFields?: unknown;
  };
  return { ...pod, metadata };
}

/**
 * The predecessor's parent in the heir's identity: its spec, labels and annotations (what ran
 * well), with the heir's name, uid and namespace, so that everything the sanitizer derives from
 * those (the manifest's name, its owner, the paths of its files, downward-API files) is the
 * heir's.
 */
export function inheritedParent(predecessor: Pod, heir: Pod): Pod {
  const pod = originParent(predecessor);
  const { uid: _, ...metadata } = pod.metadata;
  const { name, namespace, uid } = heir.metadata;
  return { ...pod, metadata: { ...metadata, name, namespace, ...(uid ? { uid } : {}) } };
}
