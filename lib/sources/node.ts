/**
 * Connects the agent to the node its configuration names: the API server and kubelet clients
 * from the kubeconfig, and the container runtime client. A kubeconfig the agent cannot use does
 * not stop it: checkpoints must still be activated during an outage, which needs only the runtime
 * and the disk, so the API server then fails every pass with a loud configuration error.
 *
 * The HTTP clients are built again when the kubeconfig, a certificate or key file it names, or
 * the kubelet CA changes: the kubelet rotates its client certificate in place
 * (kubelet-client-current.pem), and a kubeconfig written after the agent started (kubeadm init)
 * must be picked up. An agent that kept an expired certificate would see the API server as
 * unavailable while it is up, and activate checkpoints beside their running parents.
 */
import { type Config, KUBELET_CA_OFF } from "../config/types.ts";
import { settledIdentity } from "../disk/verified_files.ts";
import { type ApiServerClient, createApiServerClient } from "./apiserver.ts";
import { ChangeFanout, type ChangeFeed } from "./changes.ts";
import { connectRuntime, type RuntimeClient } from "./cri.ts";
import type { Logger } from "../util/log.ts";
import { type Credentials, loadKubeconfig } from "./kubeconfig.ts";
import { createKubeletClient, type KubeletCa, type KubeletClient } from "./kubelet.ts";
import { failed } from "./types.ts";
import type { ObjectRef } from "./object_watches.ts";

/** The three peers a pass asks. */
export interface NodeSources {
  apiServer: ApiServerClient;
  kubelet: KubeletClient;
  runtime: RuntimeClient;
  /** What the peers tell of their own accord, for passes on events; unset: nothing. */
  changes?: ChangeFeed;
  /** Ends the watches, if any (the runtime's connection is closed by `runtime.close`). */
  close?(): void;
}

function unusableApiServer(reason: string): ApiServerClient {
  const fail = () => Promise.resolve(failed<never>("apiserver", "misconfigured", reason));
  return { listNodePods: fail, getSecret: fail, getConfigMap: fail };
}

/** The kubelet's CA as the configuration names it; a string: why it cannot be read. */
async function kubeletCa(config: Config): Promise<KubeletCa | string> {
  if (config.kubeletCaFile === KUBELET_CA_OFF) return { kind: "off" };
  if (config.kubeletCaFile === undefined) return { kind: "cluster" };
  try {
    return {
      kind: "file",
      path: config.kubeletCaFile,
      pem: await Deno.readTextFile(config.kubeletCaFile),
    };
  } catch (e) {
    return `kubeletCaFile ${config.kubeletCaFile}: ${(e as Error).message}`;
  }
}

function kubeletClient(
  config: Config,
  creds: Credentials,
  ca: KubeletCa | string,
  log?: Logger,
): KubeletClient {
  // An unreadable CA must not quietly turn verification off.
  if (typeof ca === "string") {
    return { listPods: () => Promise.resolve(failed("kubelet", "misconfigured", ca)) };
  }
  return createKubeletClient({
    url: config.kubeletUrl,
    readonlyUrl: config.kubeletReadonlyUrl,
    ca,
    creds,
    timeoutMs: config.kubeletTimeoutMs,
    onUnverified: (message, fields) => log?.warn(message, fields),
  });
}

type HttpSources = Pick<NodeSources, "apiServer" | "kubelet">;

/** What the HTTP clients are built from, read from their files now. */
async function readInputs(config: Config) {
  const kubeconfig = loadKubeconfig(config.kubeconfig);
  const ca = await kubeletCa(config);
  return {
    kubeconfig,
    ca,
    // A CA file that cannot be read is watched too: the clients are built again once it can.
    files: [
      ...kubeconfig.files,
      ...(typeof ca === "string" || ca.kind === "file" ? [config.kubeletCaFile!] : []),
    ],
    /** Equal for two reads that would build the same clients. */
    content: JSON.stringify([kubeconfig.ok ? kubeconfig.credentials : kubeconfig.error, ca]),
  };
}

type Inputs = Awaited<ReturnType<typeof readInputs>>;

function httpSources(
  config: Config,
  inputs: Inputs,
  log?: Logger,
  changes?: ChangeFanout,
): HttpSources {
  const { kubeconfig } = inputs;
  // Without a kubeconfig the kubelet's read-only port can still be asked.
  const creds: Credentials = kubeconfig.ok
    ? kubeconfig.credentials
    : { server: "", insecure: false };
  return {
    apiServer: kubeconfig.ok
      ? createApiServerClient(
        kubeconfig.credentials,
        config.apiTimeoutMs,
        undefined,
        changes && { nodeName: config.nodeName, changes, resyncMs: config.resyncIntervalMs },
      )
      : unusableApiServer(kubeconfig.error),
    kubelet: kubeletClient(config, creds, inputs.ca, log),
  };
}

/**
 * What the files look like now; undefined while one of them changed too recently to tell a
 * later change from this one (it is then read again next time: lib/disk/verified_files.ts).
 */
function filesIdentity(files: readonly string[], now: number): string | undefined {
  const identities: string[] = [];
  for (const file of files) {
    let info: Deno.FileInfo;
    try {
      info = Deno.statSync(file);
    } catch {
      identities.push("absent");
      continue;
    }
    const identity = settledIdentity(info, now);
    if (identity === undefined) return undefined;
    identities.push(identity);
  }
  return identities.join("\n");
}

export interface ConnectOptions {
  /** Wall-clock milliseconds, as the kernel stamps ctime; a test may pass its own. */
  now?: () => number;
  /** Told, with the files now in use, when the HTTP clients were built again because one of
   *  their files changed. */
  onReload?: (files: readonly string[]) => void;
  /** Where the clients say what the operator should know (an unverified kubelet, once per
   *  build of the clients). */
  log?: Logger;
  /** Watch the node's pods and the objects the checkpoints need, and tell their changes
   *  (`NodeSources.changes`): for a daemon. Unset, every question is a plain request. */
  watch?: boolean;
}

export async function connectNode(
  config: Config,
  options: ConnectOptions = {},
): Promise<NodeSources> {
  const now = options.now ?? Date.now;
  const changes = options.watch ? new ChangeFanout() : undefined;
  let inputs = await readInputs(config);
  let sources = httpSources(config, inputs, options.log, changes);
  let identity = filesIdentity(inputs.files, now());
  let watchedObjects: ObjectRef[] | undefined;
  const refresh = async (): Promise<HttpSources> => {
    if (identity !== undefined && filesIdentity(inputs.files, now()) === identity) return sources;
    // Undefined: files written just now, at start or since; read again, and tell no one.
    const changed = identity !== undefined;
    const read = await readInputs(config);
    identity = filesIdentity(read.files, now());
    const same = read.content === inputs.content;
    inputs = read;
    // The same content (files written again as they were, or read again until settled): the
    // same clients, whose watches go on.
    if (same) return sources;
    // The old client's watches end with it: the new one lists and watches anew, the pods and
    // the objects the old one was last told of (the pass tells them only when they change).
    sources.apiServer.close?.();
    sources = httpSources(config, read, options.log, changes);
    if (watchedObjects !== undefined) sources.apiServer.watchObjects?.(watchedObjects);
    if (changed) options.onReload?.(read.files);
    return sources;
  };
  // The API server's and the kubelet's listings start together: one check serves both.
  let checking: Promise<HttpSources> | undefined;
  const current = () => checking ??= refresh().finally(() => checking = undefined);
  const api = () => sources.apiServer;
  return {
    apiServer: {
      listNodePods: async (nodeName) => (await current()).apiServer.listNodePods(nodeName),
      // A refresh's burst of GETs follows the pass's listing, with the clients it used.
      getSecret: (namespace, name) => api().getSecret(namespace, name),
      getConfigMap: (namespace, name) => api().getConfigMap(namespace, name),
      watchedNodePods: (nodeName) => api().watchedNodePods?.(nodeName),
      watchObjects: (refs) => {
        watchedObjects = [...refs];
        api().watchObjects?.(watchedObjects);
      },
      objectVersion: (ref) => api().objectVersion?.(ref),
    },
    kubelet: { listPods: async () => (await current()).kubelet.listPods() },
    runtime: connectRuntime(config.containerRuntimeEndpoint, config.runtimeRequestTimeoutMs),
    ...(changes ? { changes, close: () => api().close?.() } : {}),
  };
}
