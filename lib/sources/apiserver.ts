/**
 * The API server, as the agent asks it: this node's pods, and the secrets and configmaps a
 * checkpoint needs. Any failure is a failure — in particular a 503 from an API server whose etcd
 * is gone is "API unavailable", never "no pods" (docs/design.md#source-failures).
 */
import { z } from "zod";
import { isValidNamespace, isValidObjectName } from "../core/ids.ts";
import { type Pod, PodSchema } from "../core/pod.ts";
import { ConnectionPool, getJson, type HttpTarget, type JsonGet } from "./http.ts";
import { type Credentials, readBearerToken } from "./kubeconfig.ts";
import { chooseProxy, type ProxyEnvironment } from "./proxy.ts";
import { failed, type SourceResult, succeeded } from "./types.ts";

export interface ApiServerClient {
  /** GET /api/v1/pods?fieldSelector=spec.nodeName%3D<node> (all namespaces). Any failure
   *  (no connection, timeout, error status, bad body) is a failure: the agent treats it as
   *  "API unavailable" for the pass — a 503 from an API server whose etcd is gone must never
   *  look like "no pods". */
  listNodePods(nodeName: string): Promise<SourceResult<Pod[]>>;
  /** data values base64-decoded */
  getSecret(namespace: string, name: string): Promise<SourceResult<Record<string, Uint8Array>>>;
  /** data (UTF-8) and binaryData (base64) merged */
  getConfigMap(namespace: string, name: string): Promise<SourceResult<Record<string, Uint8Array>>>;
}

/**
 * An item of a list, checked with PodSchema but kept as the very object JSON.parse made: zod's
 * copy is dropped at once. Kept, the copies of a 1,000-pod list (more bytes than the parsed list
 * itself) outlived V8's young generation on every pass, twice: the API server's list and the
 * kubelet's. PodSchema changes nothing it accepts, so the item is what the copy would have been.
 */
const PodItemSchema = z.unknown().check((payload) => {
  const checked = PodSchema.safeParse(payload.value);
  if (!checked.success) payload.issues.push(...checked.error.issues as z.core.$ZodRawIssue[]);
});

/**
 * A PodList as the API server and the kubelet send it; `kind` is required so that a 200 from
 * something that is not Kubernetes cannot pass for an empty list. Items keep their fields.
 * `"items": null` is an empty list: Go encodes an empty slice as null, and a kubelet without
 * pods answers `{"kind":"PodList","apiVersion":"v1","metadata":{},"items":null}`. A list
 * without `items` at all is not a list.
 */
export const PodListSchema = z.looseObject({
  kind: z.literal("PodList"),
  items: z.array(PodItemSchema).nullable(),
}).transform((list) => (list.items ?? []) as Pod[]);

const Base64Value = z.string().transform((text, ctx) => {
  try {
    return Uint8Array.fromBase64(text);
  } catch {
    ctx.addIssue({ code: "custom", message: "not valid base64" });
    return z.NEVER;
  }
});

const SecretSchema = z.looseObject({
  kind: z.literal("Secret"),
  data: z.record(z.string(), Base64Value).nullish(),
}).transform((secret) => ({ ...secret.data }));

const ConfigMapSchema = z.looseObject({
  kind: z.literal("ConfigMap"),
  data: z.record(z.string(), z.string()).nullish(),
  binaryData: z.record(z.string(), Base64Value).nullish(),
}).transform((configMap) => {
  const encoder = new TextEncoder();
  const files: Record<string, Uint8Array> = { ...configMap.binaryData };
  for (const [key, text] of Object.entries(configMap.data ?? {})) files[key] = encoder.encode(text);
  return files;
});

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

/**
 * `env`: where the proxy variables are read (lib/sources/proxy.ts), once, now; the kubeconfig's
 * proxy-url, if any, is used instead.
 */
export function createApiServerClient(
  creds: Credentials,
  timeoutMs: number,
  env: ProxyEnvironment = Deno.env.toObject(),
): ApiServerClient {
  const target = apiServerTarget(creds, timeoutMs, env);
  const get = <T>(path: string, schema: z.ZodType<T>) => getAsUser(target, creds, { path, schema });

  function getObject<T>(
    resource: "secrets" | "configmaps",
    namespace: string,
    name: string,
    schema: z.ZodType<T>,
  ): Promise<SourceResult<T>> {
    if (!isValidNamespace(namespace) || !isValidObjectName(name)) {
      // Such an object cannot exist, and its name must not reach a URL.
      return Promise.resolve(
        failed(
          "apiserver",
          "not-found",
          `${resource} ${JSON.stringify(`${namespace}/${name}`)}: invalid name`,
        ),
      );
    }
    const path = `/api/v1/namespaces/${encodeURIComponent(namespace)}/${resource}/${
      encodeURIComponent(name)
    }`;
    return get(path, schema);
  }

  return {
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
      const selector = encodeURIComponent(`spec.nodeName=${nodeName}`);
      return get(`/api/v1/pods?fieldSelector=${selector}`, PodListSchema);
    },
    getSecret: (namespace, name) => getObject("secrets", namespace, name, SecretSchema),
    getConfigMap: (namespace, name) => getObject("configmaps", namespace, name, ConfigMapSchema),
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

const VersionSchema = z.looseObject({ gitVersion: z.string() });

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
