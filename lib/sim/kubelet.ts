/**
 * A simulated kubelet: `/pods` on the secure port (its own self-signed serving certificate,
 * client certificates from the cluster CA) and, optionally, on the read-only plain-HTTP port.
 * Static pods appear the way the kubelet shows them: renamed `<name>-<node>`, bound to the node
 * and annotated `kubernetes.io/config.source: file` (their mirror pods in the API server look
 * the same).
 */
import { type Pod, POD_SOURCE_ANNOTATION } from "../core/pod.ts";
import { podListBody } from "./apiserver.ts";
import {
  type PeerControl,
  type PeerRequest,
  type PeerResponse,
  type SimPeerOptions,
  startSimPeer,
} from "./peer.ts";
import { createSelfSignedServerCert, type SimCa } from "./pki.ts";

export const CONFIG_HASH_ANNOTATION = "kubernetes.io/config.hash";

export interface SimKubeletOptions {
  nodeName: string;
  /** Client certificates must be signed by this CA (the kubelet's `--client-ca-file`). */
  clientCaPem: string;
  /** Also serve the read-only port (plain HTTP, no authentication). */
  readonlyPort?: boolean;
  /**
   * The CA that signs the serving certificate, as for a kubelet with `serverTLSBootstrap`;
   * unset: the certificate is self-signed (kubeadm's default).
   */
  servingCa?: SimCa;
}

export interface SimKubelet {
  /** `https://127.0.0.1:<port>` */
  readonly url: string;
  readonly readonlyUrl?: string;
  /** Self-signed: configure it as the kubelet CA to have the agent verify the kubelet. */
  readonly servingCertPem: string;
  readonly secure: PeerControl;
  readonly readonly?: PeerControl;
  /** Pods the API server bound to this node, as the kubelet lists them. */
  setPods(pods: Pod[]): void;
  /** Static-pod manifests the kubelet found in its manifest directory. */
  setStaticPods(manifests: Pod[]): void;
  close(): Promise<void>;
}

/** FNV-1a, hex: a stable stand-in for the kubelet's hash of a static pod's manifest. */
function manifestHash(manifest: Pod): string {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(JSON.stringify(manifest))) {
    hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  }
  return hash.toString(16).padStart(8, "0");
}

/** A static pod as the kubelet reports it (and mirrors it to the API server). */
export function staticPodAsKubeletShowsIt(manifest: Pod, nodeName: string): Pod {
  const hash = manifestHash(manifest);
  return {
    ...manifest,
    metadata: {
      ...manifest.metadata,
      name: `${manifest.metadata.name}-${nodeName}`,
      uid: hash,
      annotations: {
        ...manifest.metadata.annotations,
        [POD_SOURCE_ANNOTATION]: "file",
        [CONFIG_HASH_ANNOTATION]: hash,
      },
    },
    spec: { ...manifest.spec, nodeName },
  };
}

/** The kubelet answers errors in plain text, not as Kubernetes Status objects. */
function failure(fault: "server-error" | "unauthorized" | "forbidden", request: PeerRequest) {
  switch (fault) {
    case "server-error":
      return { status: 500, body: "Internal Error: failed to list pods" };
    case "unauthorized":
      return { status: 401, body: "Unauthorized" };
    case "forbidden":
      return {
        status: 403,
        body:
          `Forbidden (user=system:anonymous, verb=get, resource=nodes, subresource=proxy, path=${request.path})`,
      };
  }
}

export async function startSimKubelet(options: SimKubeletOptions): Promise<SimKubelet> {
  const serving = options.servingCa
    ? await options.servingCa.issueServerCert(options.nodeName)
    : await createSelfSignedServerCert(options.nodeName);
  let pods: Pod[] = [];
  let staticPods: Pod[] = [];

  function handle(request: PeerRequest): PeerResponse {
    if (request.method !== "GET") return { status: 405, body: "Method Not Allowed" };
    if (request.path !== "/pods" && request.path !== "/pods/") {
      return { status: 404, body: "404 page not found" };
    }
    return { status: 200, body: podListBody([...pods, ...staticPods]) };
  }

  const routes: Omit<SimPeerOptions, "tls"> = { handle, failure };
  const secure = await startSimPeer({
    ...routes,
    tls: { certPem: serving.certPem, keyPem: serving.keyPem, clientCaPem: options.clientCaPem },
  });
  const readonly = options.readonlyPort ? await startSimPeer(routes) : undefined;

  return {
    url: secure.url,
    ...(readonly ? { readonlyUrl: readonly.url, readonly } : {}),
    servingCertPem: serving.certPem,
    secure,
    setPods(list) {
      pods = [...list];
    },
    setStaticPods(manifests) {
      staticPods = manifests.map((m) => staticPodAsKubeletShowsIt(m, options.nodeName));
    },
    async close() {
      await Promise.all([secure.close(), readonly?.close()]);
    },
  };
}
