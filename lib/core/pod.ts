/**
 * The slice of the Kubernetes v1 Pod the agent reads, and the filters of docs/design.md#identity.
 * Pods stay loose objects: a checkpoint is a copy of the whole parent, so unknown fields must
 * survive.
 */
import * as v from "valibot";
import { isShortPodNameOf } from "./ids.ts";
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

/** The `namespace` setting's filter: only pods in these namespaces; every pod when empty. */
export function inNamespaces(namespaces: readonly string[]): (pod: Pod) => boolean {
  const allowed = new Set(namespaces);
  return (pod) => allowed.size === 0 || allowed.has(pod.metadata.namespace);
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
