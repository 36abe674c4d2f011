/**
 * The one HTTP(S) GET both the API server and the kubelet clients use. node:http(s) because it is
 * the only mechanism in Deno that does all of: a private CA, client certificates, and — for a
 * kubelet serving a self-signed certificate — no verification at all. Every call has a deadline
 * and a body cap, and every outcome is a value: a parsed body or a classified SourceFailure.
 */
import http from "node:http";
import https from "node:https";
import type { z } from "zod";
import { formatSchemaError } from "../core/schema_error.ts";
import {
  failed,
  type FailureKind,
  type SourceName,
  type SourceResult,
  succeeded,
} from "./types.ts";

/** A PodList of a thousand pods with managedFields is tens of MB at most. */
export const DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024;
/** Enough of an error body to quote a Kubernetes Status message. */
const ERROR_BODY_BYTES = 16 * 1024;
const QUOTED_TEXT_CHARS = 200;

export interface TlsSettings {
  /** Trusted roots; unset: the system's. */
  caPem?: string;
  /** false accepts any certificate: for a kubelet's self-signed one, or an explicit kubeconfig
   *  `insecure-skip-tls-verify`. */
  verifyServer: boolean;
  /** The name the certificate must carry, when it differs from the URL's host. */
  serverName?: string;
  certPem?: string;
  keyPem?: string;
}

export interface HttpTarget {
  source: SourceName;
  /** `https://host:port` or `http://host:port`, optionally with a path prefix. */
  baseUrl: string;
  timeoutMs: number;
  /** Used only for https URLs. */
  tls?: TlsSettings;
  maxBodyBytes?: number;
  /** Unset: a fresh connection per call. */
  connections?: ConnectionPool;
}

/**
 * Connections to one peer, kept only while its calls overlap. A refresh GETs every secret and
 * configmap, 8 checkpoints at a time: a connection per GET cost a TLS handshake each (Deno's
 * node:tls parses the CA, certificate and key anew for every connection; a pre-built
 * `tls.createSecureContext` is only a holder of those strings there) and most of a refresh's time
 * and memory. Here the calls of such a burst share a few connections, and once no call is under
 * way at the end of an event-loop turn every idle connection is closed. Nothing stays open
 * between passes: a stale connection is never reused, a peer that disappears leaves nothing
 * behind, nothing is open at exit, and a rotated credential is used from the next burst on.
 */
export class ConnectionPool {
  readonly #maxSockets: number;
  readonly #agents = new Map<string, http.Agent>();
  #inFlight = 0;
  #closing: ReturnType<typeof setTimeout> | undefined;

  /** `maxSockets`: connections open at once; further calls wait for one to be free. */
  constructor(maxSockets: number) {
    this.#maxSockets = maxSockets;
  }

  agent(protocol: "http:" | "https:"): http.Agent {
    let agent = this.#agents.get(protocol);
    if (!agent) {
      const options = { keepAlive: true, maxSockets: this.#maxSockets };
      agent = protocol === "https:" ? new https.Agent(options) : new http.Agent(options);
      // A socket may be handed back after its call was counted as ended.
      agent.on("free", () => this.#closeIdleWhenQuiet());
      this.#agents.set(protocol, agent);
    }
    return agent;
  }

  /** A call starts. */
  begin(): void {
    this.#inFlight++;
  }

  /** A call ended, its connection destroyed or handed back. */
  end(): void {
    this.#inFlight--;
    this.#closeIdleWhenQuiet();
  }

  /** The next call of a burst starts within the turn in which the previous one ended. */
  #closeIdleWhenQuiet(): void {
    if (this.#inFlight > 0) return;
    this.#closing ??= setTimeout(() => {
      this.#closing = undefined;
      if (this.#inFlight > 0) return;
      for (const agent of this.#agents.values()) {
        for (const sockets of Object.values(agent.freeSockets)) {
          for (const socket of sockets ?? []) socket.destroy();
        }
      }
    }, 0);
  }
}

export interface JsonGet<T> {
  /** Path and query, already encoded, starting with `/`. */
  path: string;
  schema: z.ZodType<T>;
  bearerToken?: string;
}

function reason(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const code = (e as { code?: unknown }).code;
  return typeof code === "string" && !e.message.includes(code)
    ? `${e.message} (${code})`
    : e.message;
}

function kindOfStatus(status: number): FailureKind {
  if (status === 401) return "unauthorized";
  if (status === 403) return "forbidden";
  if (status === 404) return "not-found";
  if (status >= 500) return "server-error";
  return "bad-response";
}

/** The `message` of a Kubernetes Status body, else the start of whatever text came back. */
function quoteBody(body: string): string {
  try {
    const message = JSON.parse(body)?.message;
    if (typeof message === "string" && message !== "") return message;
  } catch {
    // Not JSON: quote it as text.
  }
  const line = body.trim().split("\n")[0] ?? "";
  return line.length > QUOTED_TEXT_CHARS ? `${line.slice(0, QUOTED_TEXT_CHARS)}…` : line;
}

function requestOptions(url: URL, target: HttpTarget, bearerToken?: string): https.RequestOptions {
  const headers: Record<string, string> = {
    accept: "application/json",
    "user-agent": "ckpt-agent",
    ...(bearerToken !== undefined ? { authorization: `Bearer ${bearerToken}` } : {}),
  };
  const options: https.RequestOptions = {
    method: "GET",
    // URL keeps IPv6 literals bracketed; sockets want them bare.
    hostname: url.hostname.replace(/^\[(.*)\]$/, "$1"),
    port: url.port || (url.protocol === "https:" ? 443 : 80),
    path: `${url.pathname}${url.search}`,
    headers,
    agent: target.connections?.agent(url.protocol as "http:" | "https:") ?? false,
  };
  const tls = target.tls;
  if (url.protocol === "https:" && tls) {
    options.rejectUnauthorized = tls.verifyServer;
    if (tls.caPem !== undefined) options.ca = tls.caPem;
    if (tls.serverName !== undefined) options.servername = tls.serverName;
    if (tls.certPem !== undefined) options.cert = tls.certPem;
    if (tls.keyPem !== undefined) options.key = tls.keyPem;
  }
  return options;
}

/** GETs `target.baseUrl + get.path` and validates the JSON body. Never throws. */
export function getJson<T>(target: HttpTarget, get: JsonGet<T>): Promise<SourceResult<T>> {
  const href = `${target.baseUrl.replace(/\/+$/, "")}${get.path}`;
  const fail = (kind: FailureKind, detail: string, status?: number) =>
    failed<T>(target.source, kind, `GET ${href}: ${detail}`, status);

  let url: URL;
  try {
    url = new URL(href);
  } catch {
    return Promise.resolve(fail("unreachable", "not a URL"));
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    return Promise.resolve(fail("unreachable", `unsupported scheme ${url.protocol}`));
  }
  const maxBodyBytes = target.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;

  const pool = target.connections;
  pool?.begin();
  return new Promise((resolve) => {
    let request: http.ClientRequest | undefined;
    let settled = false;
    /** `answered`: the whole response was read, so its connection may serve another call. */
    const finish = (result: SourceResult<T>, answered = false) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      if (!(pool && answered)) request?.destroy();
      pool?.end();
      resolve(result);
    };
    const deadline = setTimeout(
      () => finish(fail("timeout", `no complete answer within ${target.timeoutMs} ms`)),
      target.timeoutMs,
    );

    const onResponse = (response: http.IncomingMessage) => {
      const status = response.statusCode ?? 0;
      const success = status >= 200 && status < 300;
      const limit = success ? maxBodyBytes : ERROR_BODY_BYTES;
      // Each chunk is decoded as it arrives, so its buffer dies young: kept until the end, the
      // buffers of a 4 MB PodList outlived the young generation and piled up, with every
      // pass's, in the native heap until a full GC.
      const decoder = new TextDecoder();
      const parts: string[] = [];
      let size = 0;
      const settle = (answered: boolean) => {
        if (settled) return;
        parts.push(decoder.decode());
        const body = parts.join("");
        if (!success) {
          const quoted = quoteBody(body);
          const detail = `${status} ${response.statusMessage ?? ""}`.trim();
          finish(
            fail(kindOfStatus(status), quoted ? `${detail}: ${quoted}` : detail, status),
            answered,
          );
        } else {
          finish(parseBody(body, get.schema, fail), answered);
        }
      };
      response.on("data", (chunk: Uint8Array) => {
        if (settled) return;
        size += chunk.length;
        if (size <= limit) {
          parts.push(decoder.decode(chunk, { stream: true }));
        } else if (success) {
          finish(fail("bad-response", `body larger than ${limit} bytes`));
        } else {
          settle(false);
        }
      });
      response.on("end", () => settle(true));
      response.on("error", (e) => finish(fail("unreachable", `connection lost: ${reason(e)}`)));
    };

    try {
      request = (url.protocol === "https:" ? https : http).request(
        requestOptions(url, target, get.bearerToken),
        onResponse,
      );
    } catch (e) {
      finish(fail("unreachable", reason(e)));
      return;
    }
    request.on("error", (e) => finish(fail("unreachable", reason(e))));
    request.end();
  });
}

function parseBody<T>(
  body: string,
  schema: z.ZodType<T>,
  fail: (kind: FailureKind, detail: string) => SourceResult<T>,
): SourceResult<T> {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    return fail("bad-response", `body is not JSON: ${quoteBody(body) || "(empty)"}`);
  }
  const parsed = schema.safeParse(json);
  return parsed.success
    ? succeeded(parsed.data)
    : fail("bad-response", `unexpected body: ${formatSchemaError(parsed.error)}`);
}
