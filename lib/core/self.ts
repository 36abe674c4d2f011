/**
 * The agent's own pod, when it is deployed as a pod (docs/design.md#identity). Under systemd there
 * is none.
 */
import * as v from "valibot";
import { strictObject } from "./schema.ts";

export const SelfIdentitySchema = strictObject({
  nodeName: v.string(),
  podName: v.pipe(v.string(), v.minLength(1)),
  podNamespace: v.pipe(v.string(), v.minLength(1)),
});

export type SelfIdentity = v.InferOutput<typeof SelfIdentitySchema>;

/**
 * The id of the agent's parent pod. A DaemonSet-style deployment names its pods
 * `<name>-<nodeName>`, while the parent the API server knows is `<name>`; one such suffix is
 * removed, and only when present.
 */
export function selfIdOf(self: SelfIdentity): string {
  const suffix = `-${self.nodeName}`;
  const name = self.podName.endsWith(suffix) ? self.podName.slice(0, -suffix.length) : self.podName;
  return `${self.podNamespace}/${name}`;
}
