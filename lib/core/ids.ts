/**
 * Checkpoint ids (`namespace/name`), the Kubernetes name rules, and the name a checkpoint's copy
 * runs under; the file names made of ids are in checkpoint_layout.ts.
 */
import { createHash } from "node:crypto";

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** A DNS-1123 label: what namespaces and volume names must be. */
export function isValidLabel(name: string): boolean {
  return name.length <= 63 && DNS1123_LABEL.test(name);
}

/** Namespaces are DNS-1123 labels. */
export function isValidNamespace(namespace: string): boolean {
  return isValidLabel(namespace);
}

/** The longest pod, secret or configmap name. */
const MAX_OBJECT_NAME = 253;

/** Pod, secret and configmap names are DNS-1123 subdomains. */
export function isValidObjectName(name: string): boolean {
  return name.length <= MAX_OBJECT_NAME && DNS1123_SUBDOMAIN.test(name);
}

export interface IdParts {
  namespace: string;
  name: string;
}

/** Splits `namespace/name`; undefined unless both halves are present and there is one slash. */
export function splitId(id: string): IdParts | undefined {
  const parts = id.split("/");
  if (parts.length !== 2 || parts[0] === "" || parts[1] === "") return undefined;
  return { namespace: parts[0], name: parts[1] };
}

/** Like splitId, but also requires Kubernetes-valid names (safe to use in a file path). */
export function parseValidId(id: string): IdParts | undefined {
  const parts = splitId(id);
  return parts && isValidNamespace(parts.namespace) && isValidObjectName(parts.name)
    ? parts
    : undefined;
}

/** Byte-wise order, as Go's sort.Strings: ids are reported in this order. */
export function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * What a name shortened for `id` ends with (docs/design.md#long-names): 32 hex digits (128 bits)
 * of the SHA-256 of the id, so that no lookup is needed to find it and no two ids share one.
 */
export function idDigest(id: string): string {
  return createHash("sha256").update(id).digest("hex").slice(0, 32);
}

/** NAME_MAX on Linux file systems, counted in bytes. */
export const MAX_NAME_BYTES = 255;
/** The kubelet's uid of a static pod, which it does not take from the manifest: a 128-bit hash. */
const STATIC_POD_UID_LENGTH = 32;

/**
 * The name the checkpoint of `id` carries (its `metadata.name`) on the node `nodeName`: the
 * parent's own, unless the kubelet could not run a static pod of that name
 * (docs/design.md#long-names). The kubelet names the pod `<name>-<nodeName>` (the node name
 * lowercased, which a valid one is) and validates that as a pod being created, and it makes the
 * pod's log directory `<namespace>_<name>-<nodeName>_<uid>`, which must fit in NAME_MAX, before
 * its sandbox starts. A longer name is shortened to the start of the name, `-` and idDigest, as
 * long as fits; which id it stands for stays in the checkpoint's `checkpoint-of`
 * (checkpointIdOf). Ids that are not Kubernetes-valid keep their name: nothing of theirs is ever
 * written.
 */
export function checkpointPodName(id: string, nodeName: string): string {
  const parts = parseValidId(id);
  if (!parts) return splitId(id)?.name ?? id;
  const copy = `-${nodeName}`;
  const logDir = `${parts.namespace}_${copy}_`.length + STATIC_POD_UID_LENGTH;
  const room = Math.min(MAX_OBJECT_NAME - copy.length, MAX_NAME_BYTES - logDir);
  if (parts.name.length <= room) return parts.name;
  const digest = idDigest(id);
  // A name ends in a letter or digit, and no label starts with `-`: no `.` or `-` before it.
  const start = parts.name.slice(0, Math.max(room - digest.length - 1, 0)).replace(/[-.]+$/, "");
  return start === "" ? digest : `${start}-${digest}`;
}

/** Whether `name` is a name checkpointPodName shortened for `id`, on any node. */
export function isShortPodNameOf(name: string, id: string): boolean {
  const parts = parseValidId(id);
  if (!parts || name.length >= parts.name.length) return false;
  const digest = idDigest(id);
  if (name === digest) return true;
  const start = name.slice(0, -digest.length - 1);
  return name === `${start}-${digest}` && parts.name.startsWith(start);
}

/**
 * The id under which the kubelet runs the checkpoint `id` once it is in the static-pod dir:
 * `<namespace>/<name>-<nodeName>`, of the name the checkpoint carries (checkpointPodName).
 */
export function copyPodId(id: string, nodeName: string): string {
  const namespace = splitId(id)?.namespace;
  if (namespace === undefined) return `${id}-${nodeName}`;
  return `${namespace}/${checkpointPodName(id, nodeName)}-${nodeName}`;
}
