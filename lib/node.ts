/**
 * Connects the agent to the node its configuration names: the API server and kubelet clients
 * from the kubeconfig, and the container runtime client. A kubeconfig the agent cannot use does
 * not stop it: checkpoints must still be activated during an outage, which needs only the runtime
 * and the disk, so the API server then fails every pass with a loud configuration error.
 */
import type { NodeSources } from "./agent.ts";
import type { Config } from "./config/types.ts";
import { type ApiServerClient, createApiServerClient } from "./sources/apiserver.ts";
import { connectRuntime } from "./sources/cri.ts";
import { type Credentials, loadKubeconfig } from "./sources/kubeconfig.ts";
import { createKubeletClient, type KubeletClient } from "./sources/kubelet.ts";
import { failed } from "./sources/types.ts";

/**
 * Every HTTP call to the API server or the kubelet ends within this time. Both usually answer
 * in milliseconds; a black-holed address must not stall a pass that may be activating checkpoints.
 */
export const HTTP_TIMEOUT_MS = 10_000;

function unusableApiServer(reason: string): ApiServerClient {
  const fail = () => Promise.resolve(failed<never>("apiserver", "misconfigured", reason));
  return { listNodePods: fail, getSecret: fail, getConfigMap: fail };
}

async function kubeletClient(config: Config, creds: Credentials): Promise<KubeletClient> {
  let caPem: string | undefined;
  if (config.kubeletCaFile !== undefined) {
    try {
      caPem = await Deno.readTextFile(config.kubeletCaFile);
    } catch (e) {
      // An unreadable CA must not quietly turn verification off.
      const reason = `kubeletCaFile ${config.kubeletCaFile}: ${(e as Error).message}`;
      return { listPods: () => Promise.resolve(failed("kubelet", "misconfigured", reason)) };
    }
  }
  return createKubeletClient({
    url: config.kubeletUrl,
    readonlyUrl: config.kubeletReadonlyUrl,
    caPem,
    creds,
    timeoutMs: HTTP_TIMEOUT_MS,
  });
}

export async function connectNode(config: Config): Promise<NodeSources> {
  const kubeconfig = loadKubeconfig(config.kubeconfig);
  // Without a kubeconfig the kubelet's read-only port can still be asked.
  const creds: Credentials = kubeconfig.ok
    ? kubeconfig.credentials
    : { server: "", insecure: false };
  return {
    apiServer: kubeconfig.ok
      ? createApiServerClient(kubeconfig.credentials, HTTP_TIMEOUT_MS)
      : unusableApiServer(kubeconfig.error),
    kubelet: await kubeletClient(config, creds),
    runtime: connectRuntime(config.containerRuntimeEndpoint, config.runtimeRequestTimeoutMs),
  };
}
