/**
 * The one HTTP(S) GET both the API server and the kubelet clients use. node:http(s) because it is
 * the only mechanism in Deno that does all of: a private CA, client certificates, and — for a
 * kubelet serving a self-signed certificate — no verification at all. Every call has a deadline
 * that covers everything (the proxy, the tunnel, the TLS handshake, the header and the whole
 * body) and a body cap, and every outcome is a value: a parsed body or a classified SourceFailure.
 *
 * The way to the peer is the target's ProxyChoice (lib/sources/proxy.ts), decided when the client
 * is built, and nothing else: every request names an agent built with `proxyEnv: {}`, because
 * Deno's node:http otherwise follows Node's NODE_USE_ENV_PROXY on its own, and would then send
 * even loopback requests to a proxy.
 */
import http from "node:http";
import https from "node:https";
import type net from "node:net";
import tls from "node:tls";
import { formatSchemaError } from "../core/schema_error.ts";
import { check, type Schema } from "../core/schema.ts";
import type { AnswerMemo } from "./answer_memo.ts";
import { bareHost, describeProxy, portOf, type Proxy, type ProxyChoice } from "./proxy.ts";
import { openTunnel } from "./proxy_tunnel.ts";
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
  /** Unset: a fresh connection per call. Calls through a proxy always make their own. */
  connections?: ConnectionPool;
  /** Unset: direct. */
  proxy?: ProxyChoice;
}

/** Node's option (not in the type definitions Deno ships) for "no proxy from the environment". */
const NO_ENV_PROXY = { proxyEnv: {} } as http.AgentOptions;

/**
 * An https agent that makes its connections with node:tls itself, on `socket` when given. Deno's
 * own https.Agent, for a request that names no CA while NODE_EXTRA_CA_CERTS is set, lists the
 * root certificates in JavaScript (`tls.getCACertificates`), which needs sys access to "ca": a
 * name Deno 2.9.6's `--allow-sys=` refuses, so only `--allow-sys` for everything would grant it.
 * node:tls verifies against Deno's root store without any permission, and that store holds
 * NODE_EXTRA_CA_CERTS's certificates already (docs/building.md, "The system's roots").
 */
class TlsAgent extends https.Agent {
  constructor(options: http.AgentOptions, private readonly socket?: net.Socket) {
    super({ ...options, ...NO_ENV_PROXY });
  }

  override createConnection(options: tls.ConnectionOptions) {
    if (this.socket === undefined) return tls.connect(options);
    // Paused while the proxy's answer was read; TLS takes it from here.
    this.socket.resume();
    return tls.connect({ ...options, socket: this.socket });
  }
}

/** An agent of our own for every request: see the top of this file. */
function directAgent(protocol: "http:" | "https:", options: http.AgentOptions = {}): http.Agent {
  return protocol === "https:"
    ? new TlsAgent(options)
    : new http.Agent({ ...options, ...NO_ENV_PROXY });
}

/**
 * An agent whose one connection is an established tunnel: TLS to the target inside it for an
 * https target, the tunnel itself for an http one. Tunnels are not pooled: a call through a
 * proxy pays for its own CONNECT and handshake, which is rare enough (the kubelet is on
 * loopback, and a pass lists the API server once) not to be worth a pool of tunnels.
 */
function tunnelAgent(protocol: "http:" | "https:", tunnel: net.Socket): http.Agent {
  if (protocol === "https:") return new TlsAgent({}, tunnel);
  return new (class extends http.Agent {
    override createConnection() {
      // Paused while the proxy's answer was read; the request's parser takes it from here.
      tunnel.resume();
      return tunnel;
    }
  })(NO_ENV_PROXY);
}

/** Undefined once a TCP connection to `host:port` was made (and closed), else why not. */
function probe(hostname: string, port: number): Promise<Error | undefined> {
  return Deno.connect({ hostname, port }).then(
    (conn) => {
      conn.close();
      return undefined;
    },
    (e: Error) =>
      Object.assign(new Error(`connect ${errorCode(e) ?? e.message} ${hostname}:${port}`), {
        code: errorCode(e),
      }),
  );
}

/**
 * Connections to one peer: by default kept only while its calls overlap, or, with `keepIdleMs`,
 * for as long as the peer keeps them open and a call comes at least that often.
 *
 * Overlapping calls: a refresh GETs every secret and configmap, 8 checkpoints at a time: a
 * connection per GET cost a TLS handshake each (Deno's node:tls parses the CA, certificate and
 * key anew for every connection; a pre-built `tls.createSecureContext` is only a holder of those
 * strings there) and most of a refresh's time and memory. The calls of such a burst share a few
 * connections, and once no call is under way at the end of an event-loop turn every idle
 * connection is closed: a peer asked in rare bursts is left nothing open between them.
 *
 * Kept: a peer asked every pass (the kubelet) would otherwise cost a handshake every poll
 * interval, most of a quiet pass's CPU. An idle connection the peer closes leaves the pool at
 * once (node:http's agent drops it on `close`); one idle longer than `keepIdleMs` is closed, so
 * a pool left behind when the clients are rebuilt with new credentials goes by itself. Idle
 * connections do not keep the process alive.
 */
export class ConnectionPool {
  readonly #maxSockets: number;
  readonly #keepIdleMs: number | undefined;
  readonly #agents = new Map<string, http.Agent>();
  #inFlight = 0;
  #closing: ReturnType<typeof setTimeout> | undefined;
  /** The last call got no answer at all: refused, reset, or given up on before anything came. */
  #unanswered = false;
  /** The probe under way, shared by every call that waits for it. */
  #probing: Promise<Error | undefined> | undefined;

  /** `maxSockets`: connections open at once; further calls wait for one to be free. */
  constructor(maxSockets: number, opts: { keepIdleMs?: number } = {}) {
    this.#maxSockets = maxSockets;
    this.#keepIdleMs = opts.keepIdleMs;
  }

  agent(protocol: "http:" | "https:"): http.Agent {
    let agent = this.#agents.get(protocol);
    if (!agent) {
      agent = directAgent(protocol, {
        keepAlive: true,
        maxSockets: this.#maxSockets,
        ...(this.#keepIdleMs !== undefined ? { timeout: this.#keepIdleMs } : {}),
      });
      // A socket may be handed back after its call was counted as ended.
      agent.on("free", () => this.#closeIdleWhenQuiet());
      this.#agents.set(protocol, agent);
    }
    return agent;
  }

  /** Whether the peer answered the last call that ended before its answer or with it. */
  heard(answered: boolean): void {
    this.#unanswered = !answered;
  }

  /**
   * Undefined while the peer answers. After a call it did not answer at all, the next calls are
   * made only once Deno's own connect reached it (one probe for all of them), which frees a
   * failed attempt: Deno's node:http(s) (2.9) keeps every request whose socket never connected
   * alive for good, about 40 KiB of RSS each, and a pass asks the API server every poll interval
   * through an outage, which would leak for as long as the outage lasts, exactly when the agent
   * matters. Resolves to why the peer cannot be reached, or to undefined once it could be.
   */
  reachable(hostname: string, port: number): Promise<Error | undefined> | undefined {
    if (!this.#unanswered) return undefined;
    return this.#probing ??= probe(hostname, port).then((e) => {
      this.#probing = undefined;
      if (e === undefined) this.#unanswered = false;
      return e;
    });
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
    if (this.#inFlight > 0 || this.#keepIdleMs !== undefined) return;
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
  schema: Schema<T>;
  bearerToken?: string;
  /** Told the response's headers as soon as they arrive, before its body, whatever its status. */
  onHeaders?: (headers: http.IncomingHttpHeaders) => void;
  /** The last valid answer to this GET: a body it came from is not parsed again. */
  memo?: AnswerMemo<T>;
}

/** The `problem` of a failure whose cause is that the server's certificate did not verify. */
export const CERTIFICATE_NOT_VERIFIED = "certificate not verified";

/** node:tls's codes for a certificate that does not verify (OpenSSL's X509_V_ERR names). */
const CERTIFICATE_ERRORS = new Set([
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_DECRYPT_CERT_SIGNATURE",
  "UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "CERT_SIGNATURE_FAILURE",
  "CERT_NOT_YET_VALID",
  "CERT_HAS_EXPIRED",
  "ERROR_IN_CERT_NOT_BEFORE_FIELD",
  "ERROR_IN_CERT_NOT_AFTER_FIELD",
  "CERT_CHAIN_TOO_LONG",
  "CERT_REVOKED",
  "CERT_UNTRUSTED",
  "CERT_REJECTED",
  "INVALID_CA",
  "INVALID_PURPOSE",
  "PATH_LENGTH_EXCEEDED",
  "HOSTNAME_MISMATCH",
  "ERR_TLS_CERT_ALTNAME_INVALID",
]);

function errorCode(e: unknown): string | undefined {
  const code = (e as { code?: unknown } | undefined)?.code;
  return typeof code === "string" ? code : undefined;
}

/** An error as a log line says it: its message, and its code when the message lacks it. */
export function reason(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const code = errorCode(e);
  return code !== undefined && !e.message.includes(code) ? `${e.message} (${code})` : e.message;
}

function kindOfStatus(status: number): FailureKind {
  if (status === 401) return "unauthorized";
  if (status === 403) return "forbidden";
  if (status === 404) return "not-found";
  if (status >= 500) return "server-error";
  return "bad-response";
}

/**
 * The start of a body, for a log line: at most QUOTED_TEXT_CHARS characters, quoted, with
 * control characters escaped, so that whatever a peer sent stays on one line and says what it is
 * (an HTML page, a cut-off document).
 */
export function bodyStart(body: string): string {
  const start = JSON.stringify(body.slice(0, QUOTED_TEXT_CHARS));
  return body.length > QUOTED_TEXT_CHARS ? `${start}…` : start;
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

/** The header fields of every GET (and watch) the agent sends, whatever carries it. */
export function getHeaders(bearerToken?: string): Record<string, string> {
  return {
    accept: "application/json",
    "user-agent": "ckpt-agent",
    ...(bearerToken !== undefined ? { authorization: `Bearer ${bearerToken}` } : {}),
  };
}

function requestOptions(url: URL, target: HttpTarget, bearerToken?: string): https.RequestOptions {
  const headers = getHeaders(bearerToken);
  const options: https.RequestOptions = {
    method: "GET",
    // URL keeps IPv6 literals bracketed; sockets want them bare.
    hostname: bareHost(url.hostname),
    port: url.port || (url.protocol === "https:" ? 443 : 80),
    path: `${url.pathname}${url.search}`,
    headers,
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

/**
 * An http target through an http(s) proxy: the request goes to the proxy, naming the target in
 * absolute form (RFC 9112 §3.2.2), as Go does; no tunnel.
 */
function viaForwardProxy(url: URL, proxy: Proxy, options: https.RequestOptions) {
  const protocol = proxy.url.protocol as "http:" | "https:";
  const headers = { ...options.headers, host: url.host } as Record<string, string>;
  const { username, password } = proxy.url;
  if (username !== "" || password !== "") {
    const user = `${decodeURIComponent(username)}:${decodeURIComponent(password)}`;
    headers["proxy-authorization"] = `Basic ${btoa(user)}`;
  }
  const host = bareHost(proxy.url.hostname);
  const request: https.RequestOptions = {
    method: options.method,
    hostname: host,
    port: portOf(proxy.url),
    path: url.href,
    headers,
    agent: directAgent(protocol),
  };
  return { module: protocol === "https:" ? https : http, options: request };
}

/** What a failure of a GET of `path` says it asked: the URL, and the proxy if any. */
export function describeGet(target: HttpTarget, path: string): string {
  const href = `${target.baseUrl.replace(/\/+$/, "")}${path}`;
  const route = target.proxy ?? { kind: "direct" };
  return route.kind === "proxy"
    ? `GET ${href} via proxy ${describeProxy(route.proxy)}`
    : `GET ${href}`;
}

/** How a GET under way ends early, whoever ends it. */
export interface SentGet {
  /** Destroys the request and its connection; nothing is told after. */
  destroy(): void;
}

export interface GetHandlers {
  /** The response's headers arrived. */
  response(response: http.IncomingMessage): void;
  /** The request failed: before its response, or while its body was coming. */
  error(e: unknown): void;
}

/** Failures to reach a peer at all, as node:net and Deno name them. */
const CONNECTION_ERRORS = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ETIMEDOUT",
  "EADDRNOTAVAIL",
]);

/**
 * Sends a GET of `target.baseUrl + path` the target's way: direct (through `pool`, if any; a
 * proxied call never is), through a forward proxy, or through a tunnel. Returns the kind and
 * detail of a failure instead when no request can be made.
 */
export function sendGet(
  target: HttpTarget,
  path: string,
  bearerToken: string | undefined,
  pool: ConnectionPool | undefined,
  on: GetHandlers,
): SentGet | { kind: FailureKind; detail: string } {
  const route = target.proxy ?? { kind: "direct" };
  if (route.kind === "misconfigured") {
    return { kind: "misconfigured", detail: `no proxy used: ${route.message}` };
  }
  const proxy = route.kind === "proxy" ? route.proxy : undefined;
  let url: URL;
  try {
    url = new URL(`${target.baseUrl.replace(/\/+$/, "")}${path}`);
  } catch {
    return { kind: "unreachable", detail: "not a URL" };
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    return { kind: "unreachable", detail: `unsupported scheme ${url.protocol}` };
  }
  const protocol: "http:" | "https:" = url.protocol;
  const options = requestOptions(url, target, bearerToken);
  let request: http.ClientRequest | undefined;
  const gaveUp = new AbortController();
  // A pooled peer that leaves this request without any answer is asked through a probe next.
  const peer = proxy === undefined ? pool : undefined;
  let heard: "nothing" | "answer" | "error" = "nothing";
  const handlers: GetHandlers = {
    response: (response) => {
      heard = "answer";
      peer?.heard(true);
      on.response(response);
    },
    error: (e) => {
      if (heard === "nothing") {
        heard = "error";
        if (CONNECTION_ERRORS.has(errorCode(e) ?? "")) peer?.heard(false);
      }
      on.error(e);
    },
  };
  const sent: SentGet = {
    destroy() {
      // Given up on while nothing came back (the deadline): as a connection that failed.
      if (heard === "nothing" && !gaveUp.signal.aborted) peer?.heard(false);
      gaveUp.abort();
      request?.destroy();
    },
  };

  const send = (module: typeof https | typeof http, sendOptions: https.RequestOptions) => {
    try {
      request = module.request(sendOptions, handlers.response);
    } catch (e) {
      handlers.error(e);
      return;
    }
    request.on("error", (e) => {
      if (!gaveUp.signal.aborted) handlers.error(e);
    });
    request.end();
  };

  if (proxy === undefined) {
    const direct = () =>
      send(protocol === "https:" ? https : http, {
        ...options,
        agent: pool?.agent(protocol) ?? directAgent(protocol),
      });
    const probed = pool?.reachable(String(options.hostname), Number(options.port));
    if (probed === undefined) direct();
    else {
      probed.then((e) => {
        if (gaveUp.signal.aborted) return;
        if (e === undefined) direct();
        else handlers.error(e);
      });
    }
  } else if (protocol === "http:" && !proxy.url.protocol.startsWith("socks")) {
    const forward = viaForwardProxy(url, proxy, options);
    send(forward.module, forward.options);
  } else {
    // The proxy's own TLS is verified as the target's is, as Go does (the transport's config).
    const proxyTls = { caPem: target.tls?.caPem, verifyServer: target.tls?.verifyServer ?? true };
    openTunnel(proxy, proxyTls, String(options.hostname), Number(options.port), gaveUp.signal)
      .then((tunnel) => {
        if (gaveUp.signal.aborted) {
          tunnel.destroy();
          return;
        }
        send(protocol === "https:" ? https : http, {
          ...options,
          agent: tunnelAgent(protocol, tunnel),
        });
      }, (e) => {
        if (!gaveUp.signal.aborted) on.error(e);
      });
  }
  return sent;
}

/** The problem of a request that failed before its response: a certificate, or none said. */
export function connectionProblem(e: unknown): string | undefined {
  const code = errorCode(e);
  return code && CERTIFICATE_ERRORS.has(code) ? CERTIFICATE_NOT_VERIFIED : undefined;
}

/** GETs `target.baseUrl + get.path` and validates the JSON body. Never throws. */
export function getJson<T>(target: HttpTarget, get: JsonGet<T>): Promise<SourceResult<T>> {
  const asked = describeGet(target, get.path);
  // The problem is what went wrong without the URL: the same for every object of a peer that
  // stopped answering.
  const fail = (kind: FailureKind, detail: string, status?: number, problem = detail) =>
    failed<T>(target.source, kind, `${asked}: ${detail}`, status, problem);
  const maxBodyBytes = target.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const pool = target.proxy?.kind === "proxy" ? undefined : target.connections;

  pool?.begin();
  return new Promise((resolve) => {
    let sent: SentGet | undefined;
    /** Set once a response started: the connection failing after that cuts its body short. */
    let cutShort: (() => void) | undefined;
    let settled = false;
    /** `answered`: the whole response was read, so its connection may serve another call. */
    const finish = (result: SourceResult<T>, answered = false) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      if (!(pool && answered)) sent?.destroy();
      pool?.end();
      resolve(result);
    };
    const deadline = setTimeout(
      () => finish(fail("timeout", `no complete answer within ${target.timeoutMs} ms`)),
      target.timeoutMs,
    );

    const onResponse = (response: http.IncomingMessage) => {
      const status = response.statusCode ?? 0;
      get.onHeaders?.(response.headers);
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
          finish(fail(...statusFailure(status, response.statusMessage, body)), answered);
        } else {
          const contentType = String(response.headers["content-type"] ?? "none");
          const parse = () => parseBody(body, status, contentType, get.schema, fail);
          finish(get.memo ? get.memo.answer(body, parse) : parse(), answered);
        }
      };
      cutShort = () => {
        if (settled) return;
        if (!success) return settle(false);
        parts.push(decoder.decode());
        const length = response.headers["content-length"];
        const of = length === undefined ? "" : ` of ${length}`;
        finish(fail(
          "bad-response",
          `body cut short after ${size}${of} bytes, the connection closed before its end: ${
            bodyStart(parts.join(""))
          }`,
          status,
          "body cut short",
        ));
      };
      response.on("data", (chunk: Uint8Array) => {
        if (settled) return;
        size += chunk.length;
        if (size <= limit) {
          parts.push(decoder.decode(chunk, { stream: true }));
        } else if (success) {
          finish(fail("bad-response", `body larger than ${limit} bytes`, status, "body too large"));
        } else {
          settle(false);
        }
      });
      response.on("end", () => settle(true));
      // Deno's node:http says a body cut short with 'aborted', then 'error', then 'close',
      // at once: each means the same here, whichever comes.
      for (const event of ["aborted", "error", "close"]) response.on(event, cutShort);
    };

    const started = sendGet(target, get.path, get.bearerToken, pool, {
      response: onResponse,
      error: (e) => {
        if (cutShort) return cutShort();
        finish(fail("unreachable", reason(e), undefined, connectionProblem(e)));
      },
    });
    if ("kind" in started) finish(fail(started.kind, started.detail));
    else sent = started;
  });
}

/** The failure an error status says: its kind, and the Status message or the body's start. */
export function statusFailure(
  status: number,
  statusMessage: string | undefined,
  body: string,
): [FailureKind, string, number] {
  const quoted = quoteBody(body);
  const detail = `${status} ${statusMessage ?? ""}`.trim();
  return [kindOfStatus(status), quoted ? `${detail}: ${quoted}` : detail, status];
}

function parseBody<T>(
  body: string,
  status: number,
  contentType: string,
  schema: Schema<T>,
  fail: (kind: FailureKind, detail: string, status?: number, problem?: string) => SourceResult<T>,
): SourceResult<T> {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    return fail(
      "bad-response",
      `body is not JSON (content-type ${contentType}): ${bodyStart(body)}`,
      status,
      `not JSON (${contentType.split(";")[0]})`,
    );
  }
  const parsed = check(schema, json);
  if (parsed.success) return succeeded(parsed.output);
  const problem = `unexpected body: ${formatSchemaError(schema, parsed.issues)}`;
  return fail("bad-response", `${problem}: ${bodyStart(body)}`, status, problem);
}
