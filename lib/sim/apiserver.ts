/**
 * A simulated API server for the demo node and end-to-end tests: real HTTPS with client
 * certificates, the real JSON of the few v1 endpoints the agent uses (lists, objects, Status
 * errors), state set by the caller, and the failures of an outage (see lib/sim/peer.ts).
 */
import type { Pod } from "../core/pod.ts";
import { type PeerControl, type PeerRequest, type PeerResponse, startSimPeer } from "./peer.ts";
import type { SimCa } from "./pki.ts";

export interface SimApiServer extends PeerControl {
  /** The CA that signed the serving certificate (and must sign client certificates). */
  readonly caPem: string;
  /** Replaces every pod in the cluster; lists filter them by namespace and field selector. */
  setPods(pods: Pod[]): void;
  /** true if the pod existed. */
  deletePod(namespace: string, name: string): boolean;
  /** Text values are stored as their UTF-8 bytes. */
  setSecret(namespace: string, name: string, data: Record<string, string | Uint8Array>): void;
  setConfigMap(
    namespace: string,
    name: string,
    data: Record<string, string>,
    binaryData?: Record<string, Uint8Array>,
  ): void;
  close(): Promise<void>;
}

type Json = Record<string, unknown>;

function status(code: number, reason: string, message: string, details?: Json): PeerResponse {
  return {
    status: code,
    body: {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message,
      reason,
      ...(details ? { details } : {}),
      code,
    },
  };
}

function notFound(resource: string, name: string): PeerResponse {
  return status(404, "NotFound", `${resource} "${name}" not found`, { name, kind: resource });
}

const NO_ROUTE = status(404, "NotFound", "the server could not find the requested resource");

/** What `GET /version` answers: the version of the API server being simulated. */
export const SIM_VERSION = {
  major: "1",
  minor: "34",
  gitVersion: "v1.34.2",
  gitCommit: "0000000000000000000000000000000000000000",
  gitTreeState: "clean",
  buildDate: "2025-11-11T00:00:00Z",
  goVersion: "go1.24.9",
  compiler: "gc",
  platform: "linux/amd64",
};

/**
 * A list as the API server sends it: the items carry no kind or apiVersion (the list does), and
 * an empty list has `"items": null` (Go encodes an empty slice so). The kubelet's `/pods` has the
 * same shape, without a resourceVersion.
 */
export function podListBody(pods: Iterable<Pod>, resourceVersion?: string): Json {
  const items = [...pods].map(({ kind: _kind, apiVersion: _apiVersion, ...item }) => item);
  const metadata = resourceVersion === undefined ? {} : { resourceVersion };
  return { kind: "PodList", apiVersion: "v1", metadata, items: items.length > 0 ? items : null };
}

type PodField = (pod: Pod) => string;

const SELECTABLE_POD_FIELDS: Record<string, PodField> = {
  "metadata.name": (pod) => pod.metadata.name,
  "metadata.namespace": (pod) => pod.metadata.namespace,
  "spec.nodeName": (pod) => String(pod.spec?.nodeName ?? ""),
};

/** `spec.nodeName=n1,metadata.namespace!=x`: terms joined by commas, `=`, `==` or `!=`. */
function parseFieldSelector(selector: string): ((pod: Pod) => boolean) | string {
  const tests: ((pod: Pod) => boolean)[] = [];
  for (const term of selector.split(",").filter((t) => t !== "")) {
    const match = /^([^=!]+)(==|=|!=)(.*)$/.exec(term);
    if (!match) return `invalid field selector: ${term}`;
    const [, field, operator, value] = match;
    const read = SELECTABLE_POD_FIELDS[field];
    if (!read) return `field label not supported: ${field}`;
    tests.push(operator === "!=" ? (pod) => read(pod) !== value : (pod) => read(pod) === value);
  }
  return (pod) => tests.every((test) => test(pod));
}

function base64Values(values: Record<string, Uint8Array>): Record<string, string> {
  return Object.fromEntries(Object.entries(values).map(([k, v]) => [k, v.toBase64()]));
}

/**
 * The name of the simulated cluster's control-plane endpoint (kubeadm's controlPlaneEndpoint),
 * which its serving certificate carries. It is in the .test domain, which no resolver answers:
 * only a proxy told where it is can reach the API server by it.
 */
export const SIM_API_SERVER_NAME = "apiserver.ckpt.test";

/** The names kubeadm puts in an API server's serving certificate, and the endpoint's name. */
const SERVING_NAMES = [
  "kubernetes",
  "kubernetes.default",
  "kubernetes.default.svc",
  "kubernetes.default.svc.cluster.local",
  SIM_API_SERVER_NAME,
];

export async function startSimApiServer(ca: SimCa): Promise<SimApiServer> {
  const serving = await ca.issueServerCert("kube-apiserver", SERVING_NAMES);
  const pods = new Map<string, Pod>();
  const secrets = new Map<string, Json>();
  const configMaps = new Map<string, Json>();
  let revision = 1;
  const nextRevision = () => String(++revision);
  const key = (namespace: string, name: string) => `${namespace}/${name}`;
  const objectMeta = (namespace: string, name: string) => ({
    name,
    namespace,
    uid: `sim-${namespace}-${name}`,
    resourceVersion: nextRevision(),
  });

  function listPods(request: PeerRequest, namespace?: string): PeerResponse {
    const selected = parseFieldSelector(request.query.get("fieldSelector") ?? "");
    if (typeof selected === "string") return status(400, "BadRequest", selected);
    const matching = [...pods.values()].filter((pod) =>
      (namespace === undefined || pod.metadata.namespace === namespace) && selected(pod)
    );
    return { status: 200, body: podListBody(matching, String(revision)) };
  }

  function getObject(store: Map<string, Json>, resource: string, ns: string, name: string) {
    const object = store.get(key(ns, name));
    return object ? { status: 200, body: object } : notFound(resource, name);
  }

  function handle(request: PeerRequest): PeerResponse {
    if (request.method !== "GET") {
      return status(405, "MethodNotAllowed", "the simulated API server only serves GET");
    }
    const s = request.segments;
    if (s.length === 1 && s[0] === "version") return { status: 200, body: SIM_VERSION };
    if (s.length < 3 || s[0] !== "api" || s[1] !== "v1") return NO_ROUTE;
    if (s.length === 3 && s[2] === "pods") return listPods(request);
    if (s[2] !== "namespaces" || s.length < 5) return NO_ROUTE;
    const [namespace, resource, name] = [s[3], s[4], s[5]];
    if (s.length === 5 && resource === "pods") return listPods(request, namespace);
    if (s.length !== 6) return NO_ROUTE;
    if (resource === "secrets") return getObject(secrets, resource, namespace, name);
    if (resource === "configmaps") return getObject(configMaps, resource, namespace, name);
    return NO_ROUTE;
  }

  function failure(fault: "server-error" | "unauthorized" | "forbidden", request: PeerRequest) {
    switch (fault) {
      case "server-error":
        return status(
          503,
          "ServiceUnavailable",
          "rpc error: code = Unavailable desc = etcdserver: no leader",
        );
      case "unauthorized":
        return status(401, "Unauthorized", "Unauthorized");
      case "forbidden":
        return status(
          403,
          "Forbidden",
          `forbidden: User "system:anonymous" cannot get path "${request.path}"`,
        );
    }
  }

  const peer = await startSimPeer({
    tls: { certPem: serving.certPem, keyPem: serving.keyPem, clientCaPem: ca.certPem },
    handle,
    failure,
  });

  return Object.assign(peer, {
    caPem: ca.certPem,
    setPods(list: Pod[]) {
      pods.clear();
      for (const pod of list) pods.set(key(pod.metadata.namespace, pod.metadata.name), pod);
      nextRevision();
    },
    deletePod(namespace: string, name: string) {
      const existed = pods.delete(key(namespace, name));
      if (existed) nextRevision();
      return existed;
    },
    setSecret(namespace: string, name: string, data: Record<string, string | Uint8Array>) {
      const encoder = new TextEncoder();
      const bytes = Object.fromEntries(
        Object.entries(data).map(([k, v]) => [k, typeof v === "string" ? encoder.encode(v) : v]),
      );
      secrets.set(key(namespace, name), {
        kind: "Secret",
        apiVersion: "v1",
        metadata: objectMeta(namespace, name),
        type: "Opaque",
        data: base64Values(bytes),
      });
    },
    setConfigMap(
      namespace: string,
      name: string,
      data: Record<string, string>,
      binaryData: Record<string, Uint8Array> = {},
    ) {
      configMaps.set(key(namespace, name), {
        kind: "ConfigMap",
        apiVersion: "v1",
        metadata: objectMeta(namespace, name),
        data,
        ...(Object.keys(binaryData).length > 0 ? { binaryData: base64Values(binaryData) } : {}),
      });
    },
  });
}
