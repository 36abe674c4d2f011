/** Small builders for pods as the kubelet, the API server and the manifest dirs show them. */
import {
  CHECKPOINT_ANNOTATION,
  CHECKPOINT_OF_ANNOTATION,
  type Pod,
  POD_SOURCE_ANNOTATION,
} from "../../lib/core/pod.ts";

export function pod(id: string, annotations?: Record<string, string>): Pod {
  const [namespace, name] = id.split("/");
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      namespace,
      name,
      uid: `uid-${namespace}-${name}`,
      ...(annotations ? { annotations } : {}),
    },
    spec: { containers: [{ name: "main", image: "registry.k8s.io/pause:3.10" }] },
  };
}

/** A pod that asks to be checkpointed. */
export function parent(id: string): Pod {
  return pod(id, { [CHECKPOINT_ANNOTATION]: "true" });
}

/** A checkpoint manifest as the agent writes it. */
export function checkpoint(id: string): Pod {
  return pod(id, { [CHECKPOINT_OF_ANNOTATION]: id.split("/")[1] });
}

/** A mirror of a static pod: never a parent, even when annotated. */
export function staticPod(id: string): Pod {
  return pod(id, { [CHECKPOINT_ANNOTATION]: "true", [POD_SOURCE_ANNOTATION]: "file" });
}
