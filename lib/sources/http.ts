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
    // A fresh connection per call: nothing pooled survives a call, so nothing leaks when the
    // peer disappears, and a rotated certificate is picked up on the next call.
    agent: false,
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

  return new Promise((resolve) => {
    let request: http.ClientRequest | undefined;
    let settled = false;
    const finish = (result: SourceResult<T>) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      request?.destroy();
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
      const chunks: Uint8Array[] = [];
      let size = 0;
      const settle = () => {
        if (settled) return;
        const body = new TextDecoder().decode(concat(chunks));
        if (!success) {
          const quoted = quoteBody(body);
          const detail = `${status} ${response.statusMessage ?? ""}`.trim();
          finish(fail(kindOfStatus(status), quoted ? `${detail}: ${quoted}` : detail, status));
        } else {
          finish(parseBody(body, get.schema, fail));
        }
      };
      response.on("data", (chunk: Uint8Array) => {
        if (settled) return;
        size += chunk.length;
        if (size <= limit) {
          chunks.push(chunk);
        } else if (success) {
          finish(fail("bad-response", `body larger than ${limit} bytes`));
        } else {
          settle();
        }
      });
      response.on("end", () => settle());
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

function concat(chunks: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.length;
  }
  return out;
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
