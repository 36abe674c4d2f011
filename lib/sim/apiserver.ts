/**
 * A simulated API server for the demo node and end-to-end tests: real HTTPS with client
 * certificates (HTTP/2 or HTTP/1.1, as the client offers), the real JSON of the few v1 endpoints
 * the agent uses (lists, objects, watches, Status errors), one revision for every object as
 * etcd keeps it, state set by the caller, and the failures of an outage (see lib/sim/peer.ts).
 */
import type { Pod } from "../core/pod.ts";
import {
  type PeerControl,
  type PeerRequest,
  type PeerResponse,
  type PeerStream,
  startSimPeer,
} from "./peer.ts";
import { jsonText } from "../util/json_text.ts";
import type { SimCa } from "./pki.ts";

/** How the server answers a watch: "silent" opens it and then never writes, nor ends it;
 *  "end-at-once" ends it as soon as it is open, with nothing in it (as a proxy that cuts long
 *  requests may); "gone" answers 410 Gone, as older servers answer a version too old. */
export type SimWatchMode =
  | "normal"
  | "forbidden"
  | "method-not-allowed"
  | "silent"
  | "end-at-once"
  | "gone";

/** Requests received so far, by what they asked. */
export interface RequestsByVerb {
  list: number;
  get: number;
  watch: number;
  other: number;
}

export interface SimApiServer extends PeerControl {
  /** The CA that signed the serving certificate (and must sign client certificates). */
  readonly caPem: string;
  /** Replaces every pod in the cluster; lists filter them by namespace and field selector.
   *  A pod that differs from the one it replaces gets a new resourceVersion and an event. */
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
  /** true if the object existed. */
  deleteSecret(namespace: string, name: string): boolean;
  deleteConfigMap(namespace: string, name: string): boolean;
  /** The current resourceVersion: etcd's revision, one for every object. */
  revision(): number;
  /** Forgets every event so far, as etcd's compaction does: a watch from an older
   *  resourceVersion is then answered 410 Expired. */
  compact(): void;
  setWatchMode(mode: SimWatchMode): void;
  /** "end": every open watch (of `resource`, if given) ends cleanly, as at its timeout (a last
   *  bookmark to those that allowed them); "drop": their connections are dropped, as when the
   *  API server dies. */
  closeWatches(how: "end" | "drop", resource?: "pods" | "secrets" | "configmaps"): void;
  watchesOpen(): number;
  requestsByVerb(): RequestsByVerb;
  close(): Promise<void>;
}

export interface SimApiServerOptions {
  /** How often a watch that allowed bookmarks gets one; the real server: about a minute. */
  bookmarkIntervalMs?: number;
  /** Events kept for watches that resume; a watch from before them is answered 410. */
  eventWindow?: number;
  /** Stands in for Math.random where the server picks a watch's timeout. */
  random?: () => number;
  /** HTTP/2 to clients that offer it (ALPN), as the real API server; default true. false:
   *  HTTP/1.1 only, as an API server behind a proxy that does not speak HTTP/2. */
  http2?: boolean;
}

type Json = Record<string, unknown>;

type Resource = "pods" | "secrets" | "configmaps";

const KINDS: Record<Resource, string> = { pods: "Pod", secrets: "Secret", configmaps: "ConfigMap" };

type EventType = "ADDED" | "MODIFIED" | "DELETED";

/** A change, as etcd keeps it: the object before and after (unset when there was none). */
interface Change {
  revision: number;
  resource: Resource;
  before?: Json;
  after?: Json;
}

interface Watcher {
  resource: Resource;
  selects: (object: Json) => boolean;
  out: PeerStream;
  /** Ends the watch as its timeout does: a last bookmark, if asked for, then the end. */
  end: () => void;
}

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

type Field = (object: Json) => string;

const metadataOf = (object: Json) => (object.metadata ?? {}) as Record<string, unknown>;

/** The fields each resource can be selected by (the real ones accept a few more). */
const SELECTABLE_FIELDS: Record<Resource, Record<string, Field>> = {
  pods: {
    "metadata.name": (pod) => String(metadataOf(pod).name ?? ""),
    "metadata.namespace": (pod) => String(metadataOf(pod).namespace ?? ""),
    "spec.nodeName": (pod) => String((pod.spec as Json | undefined)?.nodeName ?? ""),
  },
  secrets: {
    "metadata.name": (object) => String(metadataOf(object).name ?? ""),
    "metadata.namespace": (object) => String(metadataOf(object).namespace ?? ""),
  },
  configmaps: {
    "metadata.name": (object) => String(metadataOf(object).name ?? ""),
    "metadata.namespace": (object) => String(metadataOf(object).namespace ?? ""),
  },
};

/** `spec.nodeName=n1,metadata.namespace!=x`: terms joined by commas, `=`, `==` or `!=`. */
function parseFieldSelector(
  resource: Resource,
  selector: string,
): ((object: Json) => boolean) | string {
  const tests: ((object: Json) => boolean)[] = [];
  for (const term of selector.split(",").filter((t) => t !== "")) {
    const match = /^([^=!]+)(==|=|!=)(.*)$/.exec(term);
    if (!match) return `invalid field selector: ${term}`;
    const [, field, operator, value] = match;
    const read = SELECTABLE_FIELDS[resource][field];
    if (!read) return `field label not supported: ${field}`;
    tests.push(operator === "!=" ? (o) => read(o) !== value : (o) => read(o) === value);
  }
  return (object) => tests.every((test) => test(object));
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

/** A list of any kind: items without their kind, `"items": null` when empty (as Go sends it). */
function listBody(resource: Resource, objects: Json[], resourceVersion: number): Json {
  if (resource === "pods") return podListBody(objects as Pod[], String(resourceVersion));
  const items = objects.map(({ kind: _kind, apiVersion: _apiVersion, ...item }) => item);
  return {
    kind: `${KINDS[resource]}List`,
    apiVersion: "v1",
    metadata: { resourceVersion: String(resourceVersion) },
    items: items.length > 0 ? items : null,
  };
}

/** What a watch request says: `watch=true` or `watch=1`, as the real server accepts. */
function isWatch(query: URLSearchParams): boolean {
  const watch = query.get("watch");
  return watch === "true" || watch === "1";
}

/** The real server's default watch timeout: minRequestTimeout (30 min) times 1 to 2. */
const DEFAULT_WATCH_TIMEOUT_S = 1800;

export async function startSimApiServer(
  ca: SimCa,
  options: SimApiServerOptions = {},
): Promise<SimApiServer> {
  const bookmarkIntervalMs = options.bookmarkIntervalMs ?? 60_000;
  const eventWindow = options.eventWindow ?? 10_000;
  const random = options.random ?? Math.random;
  const serving = await ca.issueServerCert("kube-apiserver", SERVING_NAMES);
  const stores: Record<Resource, Map<string, Json>> = {
    pods: new Map(),
    secrets: new Map(),
    configmaps: new Map(),
  };
  const changes: Change[] = [];
  /** The newest revision no longer in `changes`: a watch must start at or after it. */
  let compactedThrough = 0;
  const watchers = new Set<Watcher>();
  let watchMode: SimWatchMode = "normal";
  let revision = 1;
  const key = (namespace: string, name: string) => `${namespace}/${name}`;

  /** What a watcher sees of a change: an object entering or leaving its selection too. */
  function eventFor(
    watcher: Watcher,
    change: Change,
  ): { type: EventType; object: Json } | undefined {
    if (change.resource !== watcher.resource) return undefined;
    const was = change.before !== undefined && watcher.selects(change.before);
    const is = change.after !== undefined && watcher.selects(change.after);
    if (is) return { type: was ? "MODIFIED" : "ADDED", object: change.after! };
    if (!was) return undefined;
    // Deleted, or moved out of the selection: the object as it is now, at this revision.
    const object = change.after ?? change.before!;
    const metadata = { ...metadataOf(object), resourceVersion: String(change.revision) };
    return { type: "DELETED", object: { ...object, metadata } };
  }

  /** Stores a new version of an object (or its deletion) under the next revision. */
  function commit(resource: Resource, id: string, after: Json | undefined) {
    const store = stores[resource];
    const before = store.get(id);
    const change: Change = { revision: ++revision, resource, before };
    if (after) {
      const metadata = { ...metadataOf(after), resourceVersion: String(revision) };
      change.after = { kind: KINDS[resource], apiVersion: "v1", ...after, metadata };
      store.set(id, change.after);
    } else {
      store.delete(id);
    }
    changes.push(change);
    while (changes.length > eventWindow) compactedThrough = changes.shift()!.revision;
    for (const watcher of watchers) {
      const event = eventFor(watcher, change);
      if (event) watcher.out.write(event);
    }
  }

  /** Equal but for the resourceVersion: a pod set again unchanged is no change. */
  function sameObject(a: Json | undefined, b: Json): boolean {
    if (a === undefined) return false;
    const strip = (o: Json) =>
      jsonText({ ...o, metadata: { ...metadataOf(o), resourceVersion: undefined } });
    return strip(a) === strip({ kind: a.kind, apiVersion: a.apiVersion, ...b });
  }

  function selection(request: PeerRequest, resource: Resource, namespace?: string) {
    const selects = parseFieldSelector(resource, request.query.get("fieldSelector") ?? "");
    if (typeof selects === "string") return selects;
    return (object: Json) =>
      (namespace === undefined || metadataOf(object).namespace === namespace) && selects(object);
  }

  function list(request: PeerRequest, resource: Resource, namespace?: string): PeerResponse {
    const selects = selection(request, resource, namespace);
    if (typeof selects === "string") return status(400, "BadRequest", selects);
    if (isWatch(request.query)) return watch(request, resource, selects);
    const matching = [...stores[resource].values()].filter(selects);
    return { status: 200, body: listBody(resource, matching, revision) };
  }

  function bookmark(resource: Resource) {
    const metadata = { resourceVersion: String(revision) };
    return { type: "BOOKMARK", object: { kind: KINDS[resource], apiVersion: "v1", metadata } };
  }

  function watch(
    request: PeerRequest,
    resource: Resource,
    selects: (object: Json) => boolean,
  ): PeerResponse {
    if (watchMode === "forbidden") {
      return status(403, "Forbidden", `${resource} is forbidden: cannot watch resource`);
    }
    if (watchMode === "method-not-allowed") {
      return status(405, "MethodNotAllowed", "the server does not allow this method");
    }
    if (watchMode === "gone") return status(410, "Gone", "too old resource version");
    const from = request.query.get("resourceVersion") ?? "";
    const fromRevision = Number(from);
    const timeoutText = request.query.get("timeoutSeconds");
    const timeoutS = timeoutText !== null && Number(timeoutText) > 0
      ? Number(timeoutText)
      : DEFAULT_WATCH_TIMEOUT_S * (1 + random());
    const bookmarks = request.query.get("allowWatchBookmarks") === "true";
    const silent = watchMode === "silent";
    if (watchMode === "end-at-once") return { status: 200, body: null, stream: (out) => out.end() };
    return {
      status: 200,
      body: null,
      stream: (out) => {
        const watcher: Watcher = { resource, selects, out, end: () => out.end() };
        watchers.add(watcher);
        const timers: {
          ticks?: ReturnType<typeof setInterval>;
          timeout?: ReturnType<typeof setTimeout>;
        } = {};
        out.onClose(() => {
          watchers.delete(watcher);
          clearInterval(timers.ticks);
          clearTimeout(timers.timeout);
        });
        if (silent) {
          watcher.selects = () => false;
          return;
        }
        if (from === "" || from === "0") {
          // "Any": the current state as ADDED events, then the changes from now.
          for (const object of stores[resource].values()) {
            if (selects(object)) out.write({ type: "ADDED", object });
          }
        } else if (!Number.isInteger(fromRevision) || fromRevision < compactedThrough) {
          const message = `too old resource version: ${from} (${compactedThrough + 1})`;
          out.write({ type: "ERROR", object: status(410, "Expired", message).body });
          return out.end();
        } else {
          for (const change of changes) {
            if (change.revision <= fromRevision) continue;
            const event = eventFor(watcher, change);
            if (event) out.write(event);
          }
        }
        if (bookmarks) {
          timers.ticks = setInterval(() => out.write(bookmark(resource)), bookmarkIntervalMs);
        }
        watcher.end = () => {
          if (bookmarks) out.write(bookmark(resource));
          out.end();
        };
        timers.timeout = setTimeout(watcher.end, timeoutS * 1000);
      },
    };
  }

  function getObject(resource: Resource, ns: string, name: string): PeerResponse {
    const object = stores[resource].get(key(ns, name));
    return object ? { status: 200, body: object } : notFound(resource, name);
  }

  function handle(request: PeerRequest): PeerResponse {
    if (request.method !== "GET") {
      return status(405, "MethodNotAllowed", "the simulated API server only serves GET");
    }
    const s = request.segments;
    if (s.length === 1 && s[0] === "version") return { status: 200, body: SIM_VERSION };
    if (s.length < 3 || s[0] !== "api" || s[1] !== "v1") return NO_ROUTE;
    if (s.length === 3 && s[2] === "pods") return list(request, "pods");
    if (s[2] !== "namespaces" || s.length < 5) return NO_ROUTE;
    const [namespace, resource, name] = [s[3], s[4], s[5]];
    if (!(resource in stores)) return NO_ROUTE;
    if (s.length === 5) return list(request, resource as Resource, namespace);
    if (s.length === 6 && resource !== "pods") {
      return getObject(resource as Resource, namespace, name);
    }
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
    http2: options.http2 ?? true,
    handle,
    failure,
  });

  function setObject(resource: Resource, namespace: string, name: string, object: Json) {
    const metadata = { name, namespace, uid: `sim-${namespace}-${name}` };
    commit(resource, key(namespace, name), { ...object, metadata });
  }

  function deleteObject(resource: Resource, namespace: string, name: string): boolean {
    const existed = stores[resource].has(key(namespace, name));
    if (existed) commit(resource, key(namespace, name), undefined);
    return existed;
  }

  function requestsByVerb(): RequestsByVerb {
    const counts = { list: 0, get: 0, watch: 0, other: 0 };
    for (const request of peer.requests) {
      const url = new URL(request.target, "http://sim");
      const segments = url.pathname.split("/").filter((s) => s !== "");
      const collection = segments[0] === "api" &&
        (segments.length === 3 || (segments.length === 5 && segments[2] === "namespaces"));
      if (collection && isWatch(url.searchParams)) counts.watch++;
      else if (collection) counts.list++;
      else if (segments[0] === "api" && segments.length === 6) counts.get++;
      else counts.other++;
    }
    return counts;
  }

  return Object.assign(peer, {
    caPem: ca.certPem,
    revision: () => revision,
    setPods(list: Pod[]) {
      const next = new Map(
        list.map((pod) => [key(pod.metadata.namespace, pod.metadata.name), pod]),
      );
      for (const id of [...stores.pods.keys()]) {
        if (!next.has(id)) commit("pods", id, undefined);
      }
      for (const [id, pod] of next) {
        if (!sameObject(stores.pods.get(id), pod as Json)) commit("pods", id, pod as Json);
      }
    },
    deletePod: (namespace: string, name: string) => deleteObject("pods", namespace, name),
    setSecret(namespace: string, name: string, data: Record<string, string | Uint8Array>) {
      const encoder = new TextEncoder();
      const bytes = Object.fromEntries(
        Object.entries(data).map(([k, v]) => [k, typeof v === "string" ? encoder.encode(v) : v]),
      );
      setObject("secrets", namespace, name, { type: "Opaque", data: base64Values(bytes) });
    },
    setConfigMap(
      namespace: string,
      name: string,
      data: Record<string, string>,
      binaryData: Record<string, Uint8Array> = {},
    ) {
      setObject("configmaps", namespace, name, {
        data,
        ...(Object.keys(binaryData).length > 0 ? { binaryData: base64Values(binaryData) } : {}),
      });
    },
    deleteSecret: (namespace: string, name: string) => deleteObject("secrets", namespace, name),
    deleteConfigMap: (namespace: string, name: string) =>
      deleteObject("configmaps", namespace, name),
    compact() {
      changes.length = 0;
      compactedThrough = revision;
    },
    setWatchMode(mode: SimWatchMode) {
      watchMode = mode;
    },
    closeWatches(how: "end" | "drop", resource?: Resource) {
      for (const watcher of [...watchers]) {
        if (resource !== undefined && watcher.resource !== resource) continue;
        if (how === "end") watcher.end();
        else watcher.out.drop();
      }
    },
    watchesOpen: () => watchers.size,
    requestsByVerb,
  });
}
