/**
 * Checkpoint ids (`namespace/name`) and the Kubernetes name rules; the file names made of them are
 * in checkpoint_layout.ts.
 */

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

/** Pod, secret and configmap names are DNS-1123 subdomains. */
export function isValidObjectName(name: string): boolean {
  return name.length <= 253 && DNS1123_SUBDOMAIN.test(name);
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
 * The id under which the kubelet runs the checkpoint `id` once it is in the static-pod dir: a
 * static pod is named `<name>-<nodeName>` (the node name lowercased, which a valid one is).
 */
export function copyPodId(id: string, nodeName: string): string {
  return `${id}-${nodeName}`;
}
