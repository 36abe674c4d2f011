/**
 * The slice of the Kubernetes v1 Pod the agent reads, and the filters of docs/design.md#identity.
 * Pods stay loose objects: a checkpoint is a copy of the whole parent, so unknown fields must
 * survive.
 */
import * as v from "valibot";
import { isShortPodNameOf, isValidNamespace } from "./ids.ts";
import { looseObject, record } from "./schema.ts";

export const CHECKPOINT_ANNOTATION = "checkpointer.alpha.coreos.com/checkpoint";
export const CHECKPOINT_OF_ANNOTATION = "checkpointer.alpha.coreos.com/checkpoint-of";
export const POD_SOURCE_ANNOTATION = "kubernetes.io/config.source";

const stringMap = record(v.string());

/** Never empty and never with a slash: the id `namespace/name` must split back into its parts. */
const NamePart = v.pipe(
  v.string(),
  v.minLength(1),
  v.check((s) => !s.includes("/"), "must not contain /"),
);

export const ObjectMetaSchema = looseObject({
  name: NamePart,
  namespace: NamePart,
  uid: v.optional(v.string()),
  labels: v.optional(stringMap),
  annotations: v.optional(stringMap),
});

export const PodSchema = looseObject({
  apiVersion: v.optional(v.string()),
  kind: v.optional(v.string()),
  metadata: ObjectMetaSchema,
  spec: v.optional(looseObject({})),
  status: v.optional(looseObject({})),
});

export type ObjectMeta = v.InferOutput<typeof ObjectMetaSchema>;
export type Pod = v.InferOutput<typeof PodSchema>;

/** A pod's id, `namespace/name`: the key of every map the agent keeps. */
export function podId(pod: Pod): string {
  return `${pod.metadata.namespace}/${pod.metadata.name}`;
}

function annotations(pod: Pod): Record<string, string> {
  return pod.metadata.annotations ?? {};
}

/**
 * The id a pod in a manifest dir stands for: a checkpoint's is its parent's, which is its own
 * unless its parent's name was too long to carry (checkpointPodName): then it carries the short
 * form, and `checkpoint-of` the parent's name. Any other pod, and a checkpoint whose name is not
 * the short form of what its `checkpoint-of` says: its own id.
 */
export function checkpointIdOf(pod: Pod): string {
  const parent = annotations(pod)[CHECKPOINT_OF_ANNOTATION];
  const id = `${pod.metadata.namespace}/${parent}`;
  return parent !== undefined && isShortPodNameOf(pod.metadata.name, id) ? id : podId(pod);
}

export function isStaticPod(pod: Pod): boolean {
  return annotations(pod)[POD_SOURCE_ANNOTATION] === "file";
}

/** A checkpoint carries `checkpoint-of`, whatever its value. */
export function isCheckpoint(pod: Pod): boolean {
  return Object.hasOwn(annotations(pod), CHECKPOINT_OF_ANNOTATION);
}

export function isValidParent(pod: Pod): boolean {
  return annotations(pod)[CHECKPOINT_ANNOTATION] === "true" && !isCheckpoint(pod) &&
    !isStaticPod(pod);
}

/** The `namespace` setting's word for every namespace (docs/design.md#trust). */
export const EVERY_NAMESPACE = "*";

/**
 * What is wrong with a list of the namespaces parents may come from, if anything, in one line
 * (without the setting's name): each a namespace name, or `*` alone. An empty list would be read
 * as "every namespace" by someone and as "none" by someone else, and `*` beside names as a typo
 * or as "every namespace": neither is guessed.
 */
export function namespacesProblem(namespaces: readonly unknown[]): string | undefined {
  if (namespaces.length === 0) {
    return `an empty list names no namespace: list the namespaces parents may come from, or ` +
      `"${EVERY_NAMESPACE}" for every namespace`;
  }
  for (const [i, item] of namespaces.entries()) {
    if (item === EVERY_NAMESPACE && namespaces.length > 1) {
      return `item ${i}: "${EVERY_NAMESPACE}" (every namespace) stands alone, not beside other ` +
        "namespaces";
    }
    if (item !== EVERY_NAMESPACE && (typeof item !== "string" || !isValidNamespace(item))) {
      return `item ${i}: ${JSON.stringify(item) ?? "nothing"} is not a valid namespace name`;
    }
  }
  return undefined;
}

/**
 * The `namespace` setting's filter: whether parents may come from a namespace. Unset, or
 * `["*"]`: every namespace.
 */
export function inNamespaces(namespaces?: readonly string[]): (namespace: string) => boolean {
  if (namespaces === undefined || namespaces.includes(EVERY_NAMESPACE)) return () => true;
  const allowed = new Set(namespaces);
  return (namespace) => allowed.has(namespace);
}

/** Indexes pods by id (`idOf`), keeping those the filter accepts; a later duplicate wins. */
export function podsById(
  pods: readonly Pod[],
  keep: (pod: Pod) => boolean = () => true,
  idOf: (pod: Pod) => string = podId,
) {
  const byId = new Map<string, Pod>();
  for (const pod of pods) if (keep(pod)) byId.set(idOf(pod), pod);
  return byId;
}
