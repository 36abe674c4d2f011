/**
 * The demo's cluster: the realistic control plane of lib/sim/control_plane.ts. Its pods run as
 * uid 65534, and the agent stores a pod's secrets owned by the user the pod runs as — but only
 * root may give a file away. Run by anyone else, the demo's pods run as that user instead, so
 * that a newcomer's first run works without sudo.
 */
import type { Pod } from "../core/pod.ts";
import { type ControlPlane, controlPlane } from "../sim/control_plane.ts";

export interface UserIds {
  uid: number;
  gid: number;
}

function runAs(pod: Pod, user: UserIds): Pod {
  const spec = (pod.spec ?? {}) as Record<string, unknown>;
  const context = (spec.securityContext ?? {}) as Record<string, unknown>;
  return {
    ...pod,
    spec: { ...spec, securityContext: { ...context, runAsUser: user.uid, fsGroup: user.gid } },
  };
}

export function demoCluster(nodeName: string, user: UserIds): ControlPlane {
  const cluster = controlPlane(nodeName);
  if (user.uid === 0) return cluster;
  return { ...cluster, pods: cluster.pods.map((pod) => runAs(pod, user)) };
}

/**
 * Who this process runs as, read from a file it creates: `Deno.uid()` would need a permission
 * the agent itself has no use for.
 */
export async function currentUser(): Promise<UserIds> {
  const probe = await Deno.makeTempFile({ prefix: "ckpt-demo-user-" });
  try {
    const info = await Deno.stat(probe);
    return { uid: info.uid ?? 0, gid: info.gid ?? 0 };
  } finally {
    await Deno.remove(probe);
  }
}
