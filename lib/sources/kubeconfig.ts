/**
 * Reads a kubeconfig the way kubectl does, for the one thing the agent needs: how to reach the
 * API server of the current context and who to be there. File references are read now (and
 * relative ones resolved against the kubeconfig's directory) so that a broken kubeconfig is
 * reported at once, naming the field — except a token file, which is re-read on every request
 * because projected service-account tokens rotate. The result names every file it was read from,
 * so that the caller can read it again when one of them changes (lib/sources/node.ts).
 */
import { createPrivateKey, X509Certificate } from "node:crypto";
import { dirname, resolve } from "node:path";
import { parse as parseYaml } from "yaml";
import * as v from "valibot";
import { check, looseObject } from "../core/schema.ts";
import { isMissing, schemaProblem } from "../core/schema_error.ts";
import { osErrorText } from "../util/os_error.ts";
import { parseProxyUrl } from "./proxy.ts";

export interface Credentials {
  /** `https://host:port`, possibly with a path prefix. */
  server: string;
  caPem?: string;
  /** Where caPem came from, for messages: `kubeconfig <path>: clusters[0].cluster.<field>`. */
  caOrigin?: string;
  /** The cluster's `proxy-url`: used for the API server instead of the proxy variables. */
  proxyUrl?: URL;
  /** `insecure-skip-tls-verify`: the operator chose not to verify the server's certificate. */
  insecure: boolean;
  /** `tls-server-name`: the name to verify the server's certificate against. */
  tlsServerName?: string;
  certPem?: string;
  keyPem?: string;
  token?: string;
  /** Absolute; read on each request (see readBearerToken). */
  tokenFile?: string;
}

export type KubeconfigResult =
  & (
    | { ok: true; credentials: Credentials }
    | {
      ok: false;
      /** One line: the kubeconfig's path, then the field and what is wrong with it. */
      error: string;
    }
  )
  & {
    /** Absolute paths: the kubeconfig, then every certificate or key file it names that was
     *  read or tried (not the token file, which is read on every request anyway). */
    files: string[];
  };

const text = v.pipe(v.string(), v.minLength(1));
const optionalText = v.optional(text);

const ClusterSchema = looseObject({
  server: text,
  "certificate-authority": optionalText,
  "certificate-authority-data": optionalText,
  "insecure-skip-tls-verify": v.optional(v.boolean()),
  "tls-server-name": optionalText,
  "proxy-url": optionalText,
});

const UserSchema = looseObject({
  "client-certificate": optionalText,
  "client-certificate-data": optionalText,
  "client-key": optionalText,
  "client-key-data": optionalText,
  token: optionalText,
  tokenFile: optionalText,
});

const ContextSchema = looseObject({ cluster: text, user: text });

const KubeconfigSchema = looseObject({
  "current-context": text,
  clusters: v.optional(v.array(looseObject({ name: text, cluster: ClusterSchema })), []),
  contexts: v.optional(v.array(looseObject({ name: text, context: ContextSchema })), []),
  // `user: {}` (or an empty `user:`) is how a kubeconfig says "no credentials".
  users: v.optional(v.array(looseObject({ name: text, user: v.nullish(UserSchema, {}) })), []),
});

/** Authentication kubectl supports that a node agent outside the cluster cannot use. */
const UNSUPPORTED_USER_FIELDS = ["exec", "auth-provider", "username", "password"];

/** kubectl's way of naming a field: `users[0].user.client-key`. */
function fieldPath(path: readonly PropertyKey[]): string {
  return path.map((key, i) =>
    typeof key === "number" ? `[${key}]` : `${i === 0 ? "" : "."}${String(key)}`
  ).join("");
}

class FieldError extends Error {
  constructor(field: string, detail: string) {
    super(`${field}: ${detail}`);
  }
}

function reason(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function readFileField(field: string, file: string, files?: string[]): string {
  files?.push(file);
  try {
    return Deno.readTextFileSync(file);
  } catch (e) {
    throw new FieldError(field, `cannot read ${file}: ${osErrorText(e)}`);
  }
}

function decodeDataField(field: string, data: string): string {
  let bytes: Uint8Array;
  try {
    bytes = Uint8Array.fromBase64(data.replace(/\s+/g, ""));
  } catch {
    throw new FieldError(field, "not valid base64");
  }
  return new TextDecoder().decode(bytes);
}

type PemKind = "certificate" | "private key";

const PEM_BLOCKS: Record<PemKind, RegExp> = {
  certificate: /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g,
  "private key": /-----BEGIN ([A-Z]+ )?PRIVATE KEY-----[\s\S]*?-----END \1?PRIVATE KEY-----/,
};

/** The PEM certificate blocks of a file's text, in order (a chain, or a CA bundle). */
export function certificateBlocks(text: string): string[] {
  return text.match(PEM_BLOCKS.certificate) ?? [];
}

/**
 * The blocks of the wanted kind, checked: every certificate (a chain or a CA bundle), or the one
 * private key. The kubelet keeps certificate and key in one file
 * (kubelet-client-current.pem), so both fields may name the same file.
 */
function extractPem(field: string, origin: string, text: string, kind: PemKind): string {
  const blocks = kind === "certificate" ? certificateBlocks(text) : text.match(PEM_BLOCKS[kind]);
  if (!blocks?.length) throw new FieldError(field, `${origin} holds no PEM ${kind}`);
  const pem = kind === "certificate" ? `${blocks.join("\n")}\n` : `${blocks[0]}\n`;
  try {
    if (kind === "certificate") new X509Certificate(blocks[0]);
    else createPrivateKey(pem);
  } catch (e) {
    throw new FieldError(field, `${origin} is not a valid PEM ${kind}: ${reason(e)}`);
  }
  return pem;
}

/**
 * A PEM given either as a file (`client-key`) or inline (`client-key-data`): both at once is an
 * error, as in kubectl, because which one wins is not obvious to whoever wrote it.
 */
function pemFromFileOrData(
  section: Record<string, unknown>,
  prefix: string,
  fileKey: string,
  kind: PemKind,
  baseDir: string,
  files: string[],
): string | undefined {
  const dataKey = `${fileKey}-data`;
  const file = section[fileKey] as string | undefined;
  const data = section[dataKey] as string | undefined;
  if (file !== undefined && data !== undefined) {
    throw new FieldError(`${prefix}.${dataKey}`, `set together with ${fileKey}; use one`);
  }
  if (file !== undefined) {
    const field = `${prefix}.${fileKey}`;
    const path = resolve(baseDir, file);
    return extractPem(field, `file ${path}`, readFileField(field, path, files), kind);
  }
  if (data !== undefined) {
    const field = `${prefix}.${dataKey}`;
    return extractPem(field, "the decoded data", decodeDataField(field, data), kind);
  }
  return undefined;
}

function findNamed<T extends { name: string }>(
  list: T[],
  listName: string,
  wanted: string,
  referrer: string,
): [T, number] {
  const index = list.findIndex((entry) => entry.name === wanted);
  if (index < 0) {
    throw new FieldError(referrer, `${JSON.stringify(wanted)} not found in ${listName}`);
  }
  return [list[index], index];
}

function checkServerUrl(field: string, server: string): string {
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new FieldError(field, `not a URL: ${JSON.stringify(server)}`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new FieldError(field, `not an http(s) URL: ${JSON.stringify(server)}`);
  }
  return server.replace(/\/+$/, "");
}

function credentialsFrom(
  doc: v.InferOutput<typeof KubeconfigSchema>,
  baseDir: string,
  files: string[],
): Credentials {
  const [context, contextIndex] = findNamed(
    doc.contexts,
    "contexts",
    doc["current-context"],
    "current-context",
  );
  const contextField = `contexts[${contextIndex}].context`;
  const [cluster, clusterIndex] = findNamed(
    doc.clusters,
    "clusters",
    context.context.cluster,
    `${contextField}.cluster`,
  );
  const [user, userIndex] = findNamed(
    doc.users,
    "users",
    context.context.user,
    `${contextField}.user`,
  );
  const clusterField = `clusters[${clusterIndex}].cluster`;
  const userField = `users[${userIndex}].user`;
  const c = cluster.cluster;
  const u: Record<string, unknown> = user.user;

  for (const key of UNSUPPORTED_USER_FIELDS) {
    if (u[key] !== undefined) {
      throw new FieldError(
        `${userField}.${key}`,
        "not supported: use a client certificate or a token",
      );
    }
  }
  const insecure = c["insecure-skip-tls-verify"] ?? false;
  const caPem = pemFromFileOrData(
    c,
    clusterField,
    "certificate-authority",
    "certificate",
    baseDir,
    files,
  );
  if (insecure && caPem !== undefined) {
    throw new FieldError(
      `${clusterField}.insecure-skip-tls-verify`,
      "set together with a certificate authority; use one",
    );
  }
  const certPem = pemFromFileOrData(
    u,
    userField,
    "client-certificate",
    "certificate",
    baseDir,
    files,
  );
  const keyPem = pemFromFileOrData(u, userField, "client-key", "private key", baseDir, files);
  if ((certPem === undefined) !== (keyPem === undefined)) {
    const [missing, present] = certPem === undefined
      ? ["client-certificate", "client-key"]
      : ["client-key", "client-certificate"];
    throw new FieldError(`${userField}.${missing}`, `missing (${present} is set)`);
  }
  let proxyUrl: URL | undefined;
  if (c["proxy-url"] !== undefined) {
    // client-go requires the scheme (http, https or socks5; socks5h is accepted too).
    const parsed = parseProxyUrl(c["proxy-url"], false);
    if (typeof parsed === "string") throw new FieldError(`${clusterField}.proxy-url`, parsed);
    proxyUrl = parsed;
  }
  let tokenFile: string | undefined;
  if (u.tokenFile !== undefined) {
    tokenFile = resolve(baseDir, u.tokenFile as string);
    readFileField(`${userField}.tokenFile`, tokenFile);
  }

  return {
    server: checkServerUrl(`${clusterField}.server`, c.server),
    insecure,
    ...(caPem !== undefined ? { caPem, caOrigin: `${clusterField}.${caKey(c)}` } : {}),
    ...(proxyUrl !== undefined ? { proxyUrl } : {}),
    ...(c["tls-server-name"] !== undefined ? { tlsServerName: c["tls-server-name"] } : {}),
    ...(certPem !== undefined ? { certPem, keyPem } : {}),
    ...(u.token !== undefined ? { token: u.token as string } : {}),
    ...(tokenFile !== undefined ? { tokenFile } : {}),
  };
}

function caKey(cluster: Record<string, unknown>): string {
  return cluster["certificate-authority"] !== undefined
    ? "certificate-authority"
    : "certificate-authority-data";
}

function parseKubeconfig(text: string, baseDir: string, files: string[]): Credentials {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (e) {
    throw new FieldError("document", `not valid YAML: ${reason(e).split("\n")[0]}`);
  }
  const parsed = check(KubeconfigSchema, raw ?? {});
  if (!parsed.success) {
    const { path, message } = schemaProblem(KubeconfigSchema, parsed.issues);
    throw new FieldError(fieldPath(path) || "document", isMissing(message) ? "missing" : message);
  }
  return credentialsFrom(parsed.output, baseDir, files);
}

/** Never throws: a kubeconfig that cannot be used is an error message naming the field. */
export function loadKubeconfig(path: string): KubeconfigResult {
  const absolute = resolve(path);
  const files = [absolute];
  let text: string;
  try {
    text = Deno.readTextFileSync(absolute);
  } catch (e) {
    const fix = e instanceof Deno.errors.NotFound
      ? " (set kubeconfig, --kubeconfig, to the file with the agent's credentials)"
      : e instanceof Deno.errors.PermissionDenied
      ? " (the agent runs as root: run this as root too)"
      : "";
    return {
      ok: false,
      error: `cannot read kubeconfig ${absolute}: ${osErrorText(e)}${fix}`,
      files,
    };
  }
  try {
    const credentials = parseKubeconfig(text, dirname(absolute), files);
    if (credentials.caOrigin !== undefined) {
      credentials.caOrigin = `kubeconfig ${absolute}: ${credentials.caOrigin}`;
    }
    return { ok: true, credentials, files };
  } catch (e) {
    return { ok: false, error: `kubeconfig ${absolute}: ${reason(e)}`, files };
  }
}

/**
 * The bearer token to send now: the token file's current content (client-go also prefers the
 * file over an inline token), else the inline token, else none.
 */
export async function readBearerToken(
  creds: Credentials,
): Promise<{ ok: true; token?: string } | { ok: false; error: string }> {
  if (creds.tokenFile === undefined) {
    return { ok: true, ...(creds.token !== undefined ? { token: creds.token } : {}) };
  }
  try {
    const token = (await Deno.readTextFile(creds.tokenFile)).trim();
    if (token === "") return { ok: false, error: `token file ${creds.tokenFile} is empty` };
    return { ok: true, token };
  } catch (e) {
    return { ok: false, error: `cannot read token file ${creds.tokenFile}: ${osErrorText(e)}` };
  }
}
