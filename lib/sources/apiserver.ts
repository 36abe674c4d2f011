/**
 * The API server, as the agent asks it: this node's pods, and the secrets and configmaps a
 * checkpoint needs. Any failure is a failure — in particular a 503 from an API server whose etcd
 * is gone is "API unavailable", never "no pods" (docs/design.md#source-failures).
 */
import * as v from "valibot";
import { isValidNamespace, isValidObjectName } from "../core/ids.ts";
import { type Pod, PodSchema } from "../core/pod.ts";
import { check, looseObject, record, type Schema } from "../core/schema.ts";
import { schemaProblem } from "../core/schema_error.ts";
import { API_BACK, API_LOST, type ChangeFanout } from "./changes.ts";
import { ConnectionPool, getJson, type HttpTarget, type JsonGet } from "./http.ts";
import { type Credentials, readBearerToken } from "./kubeconfig.ts";
import { type Listed, ListWatch, type ListWatchOptions, versionOf } from "./list_watch.ts";
import { ABSENT, type ObjectRef, ObjectWatches, type WatchedObject } from "./object_watches.ts";
import { chooseProxy, type ProxyEnvironment } from "./proxy.ts";
import { failed, type SourceResult, succeeded } from "./types.ts";
import {
  openWatch,
  type Watch,
  watchClients,
  type WatchHandlers,
  type WatchVia,
} from "./watch_stream.ts";

export interface ApiServerClient {
  /** GET /api/v1/pods?fieldSelector=spec.nodeName%3D<node> (all namespaces): a fresh list, a
   *  quorum read. Any failure (no connection, timeout, error status, bad body) is a failure:
   *  the agent treats it as "API unavailable" for the pass — a 503 from an API server whose
   *  etcd is gone must never look like "no pods". */
  listNodePods(nodeName: string): Promise<SourceResult<Pod[]>>;
  /** data values base64-decoded; a watched object in sync is answered without a request */
  getSecret(namespace: string, name: string): Promise<SourceResult<Record<string, Uint8Array>>>;
  /** data (UTF-8) and binaryData (base64) merged; as getSecret, from its watch when it can */
  getConfigMap(namespace: string, name: string): Promise<SourceResult<Record<string, Uint8Array>>>;
  /**
   * The node's pods as the watch of them holds them, exactly what listNodePods would give from
   * the watch's last version; undefined when they are not watched, or the watch is not in sync.
   * An API server whose etcd is gone may keep its watches open from its cache while a fresh
   * list fails: who uses this must know it can do without the server's vouching
   * (lib/pass/observe.ts).
   */
  watchedNodePods?(nodeName: string): Pod[] | undefined;
  /** The secrets and configmaps the checkpoints need now: each is watched, the others no
   *  longer. */
  watchObjects?(refs: Iterable<ObjectRef>): void;
  /** A watched object's resourceVersion ("absent" when it does not exist); undefined when it is
   *  not watched or not in sync. */
  objectVersion?(ref: ObjectRef): string | undefined;
  /** Ends every watch. */
  close?(): void;
}

/** What makes a client watch: without it, every call is a plain GET. */
export interface WatchSettings {
  /** The node whose pods are listed and watched from the start. */
  nodeName: string;
  /** Told when the pods or a watched object changed, or the API server was lost or is back. */
  changes: ChangeFanout;
  /** A full list of the node's pods this often. */
  resyncMs: number;
  /** Past its timeout, how long before a watch that has not ended is broken; default 30 s. */
  silenceMarginMs?: number;
  /** After 403 or 405, the next try of a watch this much later; default 10 min. */
  retryRefusedMs?: number;
  /** Timeouts asked for watches, in seconds: pods' and objects' [min, max). */
  podWatchSeconds?: readonly [number, number];
  objectWatchSeconds?: readonly [number, number];
  random?: () => number;
}

/**
 * An item of a list, checked with PodSchema but kept as the very object JSON.parse made: the
 * schema's copy is dropped at once. Kept, the copies of a 1,000-pod list (more bytes than the parsed list
 * itself) outlived V8's young generation on every pass, twice: the API server's list and the
 * kubelet's. PodSchema changes nothing it accepts, so the item is what the copy would have been.
 */
const PodItemSchema = v.pipe(
  v.unknown(),
  v.rawCheck(({ dataset, addIssue }) => {
    const checked = check(PodSchema, dataset.value);
    if (checked.success) return;
    const { message } = schemaProblem(PodSchema, checked.issues);
    addIssue({ message, ...(checked.issues[0].path && { path: checked.issues[0].path }) });
  }),
);

/**
 * A PodList as the API server and the kubelet send it; `kind` is required so that a 200 from
 * something that is not Kubernetes cannot pass for an empty list. Items keep their fields.
 * `"items": null` is an empty list: Go encodes an empty slice as null, and a kubelet without
 * pods answers `{"kind":"PodList","apiVersion":"v1","metadata":{},"items":null}`. A list
 * without `items` at all is not a list.
 */
export const PodListSchema = v.pipe(
  looseObject({ kind: v.literal("PodList"), items: v.nullable(v.array(PodItemSchema)) }),
  v.transform((list) => (list.items ?? []) as Pod[]),
);

/** The version a list of the API server was read at: where its watch starts. */
const ListMetaSchema = looseObject({ resourceVersion: v.pipe(v.string(), v.minLength(1)) });

const VersionedPodListSchema = v.pipe(
  looseObject({
    kind: v.literal("PodList"),
    metadata: ListMetaSchema,
    items: v.nullable(v.array(PodItemSchema)),
  }),
  v.transform((list): Listed<Pod> => ({
    items: (list.items ?? []) as Pod[],
    resourceVersion: list.metadata.resourceVersion,
  })),
);

/** A watch event's pod as a list would give it: a list's items carry no kind or apiVersion. */
function podOfEvent(object: Record<string, unknown>): Pod | undefined {
  if (!check(PodSchema, object).success) return undefined;
  const { kind: _kind, apiVersion: _apiVersion, ...pod } = object;
  return pod as Pod;
}

const Base64Value = v.pipe(
  v.string(),
  v.rawTransform(({ dataset, addIssue, NEVER }) => {
    try {
      return Uint8Array.fromBase64(dataset.value);
    } catch {
      addIssue({ message: "not valid base64" });
      return NEVER;
    }
  }),
);

const SECRET_FIELDS = { data: v.nullish(record(Base64Value)) };

const CONFIGMAP_FIELDS = {
  data: v.nullish(record(v.string())),
  binaryData: v.nullish(record(Base64Value)),
};

type SecretFields = v.InferOutput<v.ObjectSchema<typeof SECRET_FIELDS, undefined>>;
type ConfigMapFields = v.InferOutput<v.ObjectSchema<typeof CONFIGMAP_FIELDS, undefined>>;

const secretFiles = (secret: SecretFields) => ({ ...secret.data });

function configMapFiles(configMap: ConfigMapFields): Record<string, Uint8Array> {
  const encoder = new TextEncoder();
  const files: Record<string, Uint8Array> = { ...configMap.binaryData };
  for (const [key, text] of Object.entries(configMap.data ?? {})) files[key] = encoder.encode(text);
  return files;
}

/** A secret or configmap as a GET gives it: its files, and its resourceVersion if it has one. */
interface Fetched {
  files: Record<string, Uint8Array>;
  version: string | undefined;
}

const SecretSchema = v.pipe(
  looseObject({ kind: v.literal("Secret"), ...SECRET_FIELDS }),
  v.transform((secret): Fetched => ({ files: secretFiles(secret), version: versionOf(secret) })),
);

const ConfigMapSchema = v.pipe(
  looseObject({ kind: v.literal("ConfigMap"), ...CONFIGMAP_FIELDS }),
  v.transform((configMap): Fetched => ({
    files: configMapFiles(configMap),
    version: versionOf(configMap),
  })),
);

/** An etcd revision as the API server writes it. */
const REVISION = /^[1-9][0-9]{0,18}$/;

/**
 * The later of two resource versions when both are etcd revisions, else `version`. Every kind
 * kept in one etcd shares its one sequence of revisions, so a version heard on the pods' watch
 * before a GET is one the GET's read is at least as new as. A watch from a version the API
 * server's cache no longer holds is refused (410, then a list): an object unchanged for long
 * has an old version, and the pods' recent one spares it that.
 */
function laterVersion(version: string, other: string | undefined): string {
  if (other === undefined || !REVISION.test(version) || !REVISION.test(other)) return version;
  return BigInt(other) > BigInt(version) ? other : version;
}

/** A secret's or configmap's name and version, as an item of a list or an event carries them. */
const WatchedMetaSchema = looseObject({
  name: v.string(),
  resourceVersion: v.pipe(v.string(), v.minLength(1)),
});

const watched = (
  metadata: v.InferOutput<typeof WatchedMetaSchema>,
  files: Record<string, Uint8Array>,
): WatchedObject => ({ name: metadata.name, version: metadata.resourceVersion, files });

const WatchedSecretSchema = v.pipe(
  looseObject({ metadata: WatchedMetaSchema, ...SECRET_FIELDS }),
  v.transform((secret) => watched(secret.metadata, secretFiles(secret))),
);

const WatchedConfigMapSchema = v.pipe(
  looseObject({ metadata: WatchedMetaSchema, ...CONFIGMAP_FIELDS }),
  v.transform((configMap) => watched(configMap.metadata, configMapFiles(configMap))),
);

function objectListSchema(item: Schema<WatchedObject>): Schema<Listed<WatchedObject>> {
  return v.pipe(
    looseObject({ metadata: ListMetaSchema, items: v.nullable(v.array(item)) }),
    v.transform((list) => ({
      items: list.items ?? [],
      resourceVersion: list.metadata.resourceVersion,
    })),
  );
}

interface WatchedKind {
  resource: string;
  list: Schema<Listed<WatchedObject>>;
  /** An object of an event as an item; undefined when it is not one. */
  parse(object: unknown): WatchedObject | undefined;
}

function watchedKind(resource: string, item: Schema<WatchedObject>): WatchedKind {
  return {
    resource,
    list: objectListSchema(item),
    parse(object) {
      const parsed = check(item, object);
      return parsed.success ? parsed.output : undefined;
    },
  };
}

/** Made once: a schema per watch would be most of what a watch keeps in memory. */
const WATCHED: Record<ObjectRef["kind"], WatchedKind> = {
  secret: watchedKind("secrets", WatchedSecretSchema),
  configMap: watchedKind("configmaps", WatchedConfigMapSchema),
};

/**
 * Connections the API server client opens at once. The agent fetches objects for 8 checkpoints
 * at a time, each one object after the other, so 8 serve a refresh without waiting.
 */
const API_SERVER_CONNECTIONS = 8;

/** How the API server is reached: `env` is where the proxy variables are read (once, now). */
function apiServerTarget(creds: Credentials, timeoutMs: number, env: ProxyEnvironment): HttpTarget {
  return {
    source: "apiserver",
    baseUrl: creds.server,
    timeoutMs,
    proxy: chooseProxy(new URL(creds.server), env, creds.proxyUrl),
    connections: new ConnectionPool(API_SERVER_CONNECTIONS),
    tls: {
      verifyServer: !creds.insecure,
      ...(creds.caPem !== undefined ? { caPem: creds.caPem } : {}),
      ...(creds.tlsServerName !== undefined ? { serverName: creds.tlsServerName } : {}),
      ...(creds.certPem !== undefined ? { certPem: creds.certPem, keyPem: creds.keyPem } : {}),
    },
  };
}

/** A GET with the bearer token the credentials give now, if any. */
async function getAsUser<T>(
  target: HttpTarget,
  creds: Credentials,
  request: Omit<JsonGet<T>, "bearerToken">,
): Promise<SourceResult<T>> {
  const token = await readBearerToken(creds);
  if (!token.ok) {
    return failed("apiserver", "unauthorized", `GET ${request.path}: ${token.error}`);
  }
  return getJson(target, { ...request, bearerToken: token.token });
}

/** A watch with the bearer token the credentials give when it starts, if any. */
function watchAsUser(
  target: HttpTarget,
  creds: Credentials,
  via: WatchVia,
  path: string,
  on: WatchHandlers,
): Watch {
  let watch: Watch | undefined;
  let closed = false;
  void readBearerToken(creds).then((token) => {
    if (closed) return;
    if (token.ok) watch = openWatch(target, path, token.token, via, on);
    else {
      const refused = failed("apiserver", "unauthorized", `watch ${path}: ${token.error}`);
      if (!refused.ok) on.ended(refused.failure);
    }
  });
  return {
    close() {
      closed = true;
      watch?.close();
    },
  };
}

const podKey = (pod: Pod) => `${pod.metadata.namespace}/${pod.metadata.name}`;
const objectName = (object: WatchedObject) => object.name;

function nodePodsPath(nodeName: string): string {
  return `/api/v1/pods?fieldSelector=${encodeURIComponent(`spec.nodeName=${nodeName}`)}`;
}

/** A namespace's collection of secrets or configmaps, narrowed to one object by name. */
function objectCollectionPath(ref: ObjectRef): string {
  return `/api/v1/namespaces/${encodeURIComponent(ref.namespace)}/${WATCHED[ref.kind].resource}` +
    `?fieldSelector=${encodeURIComponent(`metadata.name=${ref.name}`)}`;
}

/**
 * The timeout asked for each object's watch, [min, max) seconds: an hour or two, and longer
 * with more objects, so that renewing them all costs at most about 1.3 requests a minute
 * however many there are (from 120 objects on, N watches each renewed every 45 N s on
 * average). The API server honours any timeout a client asks for (without one, it picks 30 to
 * 60 minutes).
 */
function objectWatchSeconds(watched: number): [number, number] {
  const min = Math.max(3600, 30 * watched);
  return [min, 2 * min];
}

/**
 * Object watches asked and not answered yet, at most: thousands asked at once (the first pass's
 * objects, or a return after an outage) would each wait their headers' timeout behind the
 * others on a slow server, fail together, and close their connections under the server.
 */
const OBJECT_WATCHES_OPENING = 64;

/** Runs what is given at most `limit` at a time, first given first run. */
class Opening {
  #free: number;
  readonly #waiting: (() => void)[] = [];

  constructor(limit: number) {
    this.#free = limit;
  }

  /** Runs `start` when a place is free; `start` is given what frees it (idempotent). Returns
   *  what cancels it before it runs, or frees its place after. */
  enter(start: (leave: () => void) => void): () => void {
    let state: "waiting" | "in" | "out" = "waiting";
    const leave = () => {
      if (state === "in") {
        this.#free++;
        while (this.#free > 0 && this.#waiting.length > 0) this.#waiting.shift()!();
      }
      state = "out";
    };
    const run = () => {
      if (state !== "waiting") return;
      state = "in";
      this.#free--;
      start(leave);
    };
    if (this.#free > 0) run();
    else this.#waiting.push(run);
    return leave;
  }
}

/** The node's pods and the objects asked for, each listed then watched. */
function startWatches(target: HttpTarget, creds: Credentials, settings: WatchSettings) {
  // Over HTTP/2 where our connections can do what the kubeconfig asks: a few connections for
  // every watch. Otherwise HTTP/1.1: watches last, so their connections are their own, one per
  // watch, kept between watches (a watch the server ended hands its connection to the next).
  const clients = watchClients(target);
  const pool = clients ? undefined : new ConnectionPool(Infinity);
  /** A watch of the node's pods silent past its timeout: every watch is asked again at once, on
   *  new connections, as those they share may be dead without having said so. */
  const renew = () => {
    clients?.renew();
    objects.rewatchAll();
  };
  const watchOver = (path: string, on: WatchHandlers): Watch =>
    watchAsUser(target, creds, clients ? { clients } : { pool }, path, on);
  const opening = new Opening(OBJECT_WATCHES_OPENING);
  /** An object's watch, asked once fewer than OBJECT_WATCHES_OPENING wait for their answer. */
  const objectWatchOver = (path: string, on: WatchHandlers): Watch => {
    let watch: Watch | undefined;
    const leave = opening.enter((leave) => {
      watch = watchOver(path, {
        ...on,
        opened: () => {
          leave();
          on.opened();
        },
        ended: (failure) => {
          leave();
          on.ended(failure);
        },
      });
    });
    return {
      close() {
        leave();
        watch?.close();
      },
    };
  };
  // The watches' lists have connections of their own: a thousand objects listed at once must
  // not queue a pass's own requests (its fresh list of pods above all) behind them.
  const listTarget = { ...target, connections: new ConnectionPool(API_SERVER_CONNECTIONS) };
  const random = settings.random ?? Math.random;
  const pick = ([min, max]: readonly [number, number]) => Math.floor(min + (max - min) * random());
  const changes = settings.changes;
  function listWatch<T>(
    collection: string,
    list: Schema<Listed<T>>,
    over: typeof watchOver,
    rest:
      & Pick<ListWatchOptions<T>, "item" | "key" | "timeoutSeconds" | "changed">
      & Partial<ListWatchOptions<T>>,
  ): ListWatch<T> {
    return new ListWatch<T>({
      list: () => getAsUser(listTarget, creds, { path: collection, schema: list }),
      watch: (version, timeoutSeconds, on) =>
        over(
          `${collection}&watch=true&allowWatchBookmarks=true&resourceVersion=${
            encodeURIComponent(version)
          }&timeoutSeconds=${timeoutSeconds}`,
          on,
        ),
      silenceMarginMs: settings.silenceMarginMs ?? 30_000,
      retryRefusedMs: settings.retryRefusedMs ?? 600_000,
      ...rest,
    });
  }
  /** Set while the pods' watch says the API server is lost; resolved when it is back. */
  let lost: PromiseWithResolvers<void> | undefined;
  /** How many times the pods' watch said the API server was lost. */
  let outages = 0;
  const pods = listWatch(nodePodsPath(settings.nodeName), VersionedPodListSchema, watchOver, {
    item: podOfEvent,
    key: podKey,
    // client-go's reflector: its minimum watch timeout (5 min) times 1 to 2.
    timeoutSeconds: () => pick(settings.podWatchSeconds ?? [300, 600]),
    resyncMs: settings.resyncMs,
    // One watch: after the next outage, its back-off starts afresh, and the loss is told by it.
    workedAfterMs: 1_000,
    silent: renew,
    changed: () => changes.emit("pod changed"),
    reachability: (state) => {
      if (state === "lost") {
        if (lost === undefined) outages++;
        lost ??= Promise.withResolvers();
      } else {
        lost?.resolve();
        lost = undefined;
      }
      changes.emit(state === "lost" ? API_LOST : API_BACK);
    },
  });
  const objects: ObjectWatches = new ObjectWatches((ref, seed) => {
    const kind = WATCHED[ref.kind];
    return listWatch(objectCollectionPath(ref), kind.list, objectWatchOver, {
      ...(seed ? { seed } : {}),
      item: kind.parse,
      key: objectName,
      timeoutSeconds: (): number =>
        pick(settings.objectWatchSeconds ?? objectWatchSeconds(objects.size)),
      // The pods' watch tells whether the API server is there: while it says lost, the
      // objects' watches wait for its return rather than each trying on its own, thousands of
      // requests on the main thread while the pass that activates the copies runs. Their first
      // retry waits a little, as client-go's reflector's does (0.8 to 1.6 s), so that a loss
      // the pods' watch has not told yet holds them too.
      server: () => ({ lost: lost?.promise, outages }),
      firstRetryMs: () => pick([800, 1600]),
      changed: () => changes.emit(`${ref.kind === "secret" ? "secret" : "configmap"} changed`),
    });
  });
  const close = () => {
    pods.close();
    objects.close();
    clients?.close();
  };
  return { pods, objects, close };
}

/**
 * `env`: where the proxy variables are read (lib/sources/proxy.ts), once, now; the kubeconfig's
 * proxy-url, if any, is used instead. `watching`: the node's pods are watched from now on, and
 * the objects `watchObjects` names; unset, every call is a plain GET and nothing is watched.
 */
export function createApiServerClient(
  creds: Credentials,
  timeoutMs: number,
  env: ProxyEnvironment = Deno.env.toObject(),
  watching?: WatchSettings,
): ApiServerClient {
  const target = apiServerTarget(creds, timeoutMs, env);
  const get = <T>(path: string, schema: Schema<T>) => getAsUser(target, creds, { path, schema });
  const watches = watching ? startWatches(target, creds, watching) : undefined;

  async function getObject(
    ref: ObjectRef,
    schema: Schema<Fetched>,
  ): Promise<SourceResult<Record<string, Uint8Array>>> {
    const { namespace, name } = ref;
    const resource = WATCHED[ref.kind].resource;
    if (!isValidNamespace(namespace) || !isValidObjectName(name)) {
      // Such an object cannot exist, and its name must not reach a URL.
      return failed(
        "apiserver",
        "not-found",
        `${resource} ${JSON.stringify(`${namespace}/${name}`)}: invalid name`,
      );
    }
    const known = watches?.objects.files(ref);
    if (known === ABSENT) {
      return failed(
        "apiserver",
        "not-found",
        `${resource} "${namespace}/${name}" not found (watched)`,
      );
    }
    if (known !== undefined) return succeeded(known);
    const path = `/api/v1/namespaces/${encodeURIComponent(namespace)}/${resource}/${
      encodeURIComponent(name)
    }`;
    // Heard before the GET is sent: the GET reads at this version or a later one.
    const before = watches?.pods.version();
    const got = await get(path, schema);
    if (!got.ok) {
      if (got.failure.kind === "not-found" && before !== undefined) {
        watches?.objects.fetched(ref, null, before);
      }
      return got;
    }
    const { files, version } = got.value;
    if (version !== undefined) {
      watches?.objects.fetched(ref, { name, version, files }, laterVersion(version, before));
    }
    return succeeded(files);
  }

  const client: ApiServerClient = {
    listNodePods(nodeName) {
      if (!isValidObjectName(nodeName)) {
        return Promise.resolve(
          failed(
            "apiserver",
            "bad-response",
            `pods of node ${JSON.stringify(nodeName)}: not asked, invalid node name`,
          ),
        );
      }
      return get(nodePodsPath(nodeName), PodListSchema);
    },
    getSecret: (namespace, name) => getObject({ kind: "secret", namespace, name }, SecretSchema),
    getConfigMap: (namespace, name) =>
      getObject({ kind: "configMap", namespace, name }, ConfigMapSchema),
  };
  if (!watches || !watching) return client;
  return {
    ...client,
    watchedNodePods: (nodeName) =>
      nodeName === watching.nodeName ? watches.pods.items() : undefined,
    watchObjects: (refs) =>
      watches.objects.watchOnly(
        [...refs].filter((ref) => isValidNamespace(ref.namespace) && isValidObjectName(ref.name)),
      ),
    objectVersion: (ref) => watches.objects.version(ref),
    close: watches.close,
  };
}

/** The API server's clock as its `Date` header showed it, and when the node asked and heard. */
export interface ServerTime {
  /** The `Date` header, in milliseconds: whole seconds, as HTTP dates are. */
  dateMs: number;
  /** The node's clock just before the request was made and when the headers arrived. */
  sentMs: number;
  receivedMs: number;
  /** The API server's version, as `/version` says it. */
  gitVersion: string;
}

const VersionSchema = looseObject({ gitVersion: v.string() });

/**
 * GET /version (readable by anyone the API server authenticates, and by default by anonymous
 * users too) to read the API server's clock from its `Date` header. Only an answer that is the
 * API server's own counts: a proxy or load balancer answering in its place sends its own date.
 */
export async function askServerTime(
  creds: Credentials,
  timeoutMs: number,
  now: () => number = Date.now,
  env: ProxyEnvironment = Deno.env.toObject(),
): Promise<SourceResult<ServerTime>> {
  let date: string | undefined;
  let receivedMs = 0;
  const sentMs = now();
  const version = await getAsUser(apiServerTarget(creds, timeoutMs, env), creds, {
    path: "/version",
    schema: VersionSchema,
    onHeaders: (headers) => {
      receivedMs = now();
      date = headers.date;
    },
  });
  if (!version.ok) return version;
  const dateMs = Date.parse(date ?? "");
  if (Number.isNaN(dateMs)) {
    return failed(
      "apiserver",
      "bad-response",
      `GET ${creds.server}/version: ${
        date === undefined ? "no Date header" : `Date header ${JSON.stringify(date)} is no date`
      }`,
    );
  }
  return succeeded({ dateMs, sentMs, receivedMs, gitVersion: version.value.gitVersion });
}
