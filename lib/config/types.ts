/** The agent's settings once loaded and validated (see lib/config/load.ts for the sources). */
import type { SelfIdentity } from "../core/self.ts";

/** `kubeletCaFile: off`: the kubelet's serving certificate is not verified. */
export const KUBELET_CA_OFF = "off";

export interface Config {
  /** kubeconfig for the API server and the kubelet: server, CA, client cert/key or token. */
  kubeconfig: string;
  lockFile: string;
  /** `unix:///path/to/socket` (a bare path is accepted too). */
  containerRuntimeEndpoint: string;
  /** Durations are milliseconds. */
  runtimeRequestTimeoutMs: number;
  checkpointGracePeriodMs: number;
  nodeName: string;
  kubeletUrl: string;
  /** Unset: the read-only port is not asked. */
  kubeletReadonlyUrl?: string;
  /**
   * CA for the kubelet's serving certificate. Unset: the kubeconfig's cluster CA, and a kubelet
   * whose certificate it does not verify is asked with the client certificate only (never a
   * token); KUBELET_CA_OFF: not verified, client certificate only (lib/sources/kubelet.ts).
   */
  kubeletCaFile?: string;
  /** Bounds each request to the API server, body included. */
  apiTimeoutMs: number;
  /** Bounds each request to the kubelet (each port), body included. */
  kubeletTimeoutMs: number;
  staticPodDir: string;
  inactiveDir: string;
  secretsDir: string;
  configmapsDir: string;
  stateDir: string;
  pollIntervalMs: number;
  refreshIntervalMs: number;
  /** Only parents in these namespaces are checkpointed; empty means every namespace. */
  namespaces: string[];
  /** `host:port`, `[v6]:port`, `unix:/path`, or `off`. */
  adminListen: string;
  adminAllowRemote: boolean;
  adminTokenFile: string;
  /** Set only when deployed as a pod (NODE_NAME, POD_NAME, POD_NAMESPACE). */
  self?: SelfIdentity;
}
