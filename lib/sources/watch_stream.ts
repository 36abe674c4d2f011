/**
 * One watch request, on the wire: a GET whose 200 answer is a stream of JSON events, one per line
 * (`{"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":{...}}`), that lasts until the
 * server ends it at its timeout. Whatever else comes back (an error status, an HTML page, a line
 * that is not an event, a stream cut before its end) ends the watch with a failure, classified as
 * a GET's would be: what a watch's failure means is for its owner (lib/sources/list_watch.ts).
 */
import type http from "node:http";
import * as v from "valibot";
import { check, looseObject, object } from "../core/schema.ts";
import { createDirectHttpClient } from "../util/direct_http.ts";
import {
  bodyStart,
  CERTIFICATE_NOT_VERIFIED,
  type ConnectionPool,
  connectionProblem,
  describeGet,
  getHeaders,
  type HttpTarget,
  reason,
  sendGet,
  type SentGet,
  statusFailure,
} from "./http.ts";
import { bareHost, portOf } from "./proxy.ts";
import { failed, type FailureKind, type SourceFailure } from "./types.ts";
import type { Timers } from "../util/timers.ts";
import type { H2Stream, StreamHandlers } from "./h2/connection.ts";
import type { HeaderField } from "./h2/hpack.ts";
import { WatchClients } from "./watch_clients.ts";

export const WatchEventSchema = object({
  type: v.picklist(["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]),
  object: looseObject({}),
});

export type WatchEvent = v.InferOutput<typeof WatchEventSchema>;

export interface WatchHandlers {
  /** The server accepted the watch: its headers said 200. */
  opened(): void;
  event(event: WatchEvent): void;
  /** Told once when the watch is over, unless closed by its owner; `failure` unset: the
   *  server ended it cleanly, as it does at the watch's timeout. */
  ended(failure?: SourceFailure): void;
}

export interface Watch {
  /** Ends the watch and its connection; its handlers are told nothing more. */
  close(): void;
}

/** An event is a few objects at most; a line longer than this is not one. */
const MAX_LINE_BYTES = 16 * 1024 * 1024;
/** Enough of an error body to quote a Kubernetes Status message. */
const ERROR_BODY_BYTES = 16 * 1024;
/** What one read of a watch over fetch takes at most: an event may take several. */
const READ_BYTES = 4 * 1024;

type Fail = (kind: FailureKind, detail: string, status?: number, problem?: string) => void;

/** What a response's head says, whatever carried it. */
interface ResponseHead {
  status: number;
  statusMessage?: string;
  contentType: string;
}

/**
 * Reads the answer to a watch, whatever carries it (node:https or fetch): the events of a 200
 * stream of JSON, or why it is no watch. Told its bytes as they come, then its end or its cut.
 */
class WatchBody {
  readonly success: boolean;
  readonly #head: ResponseHead;
  readonly #on: WatchHandlers;
  readonly #fail: Fail;
  readonly #over: () => boolean;
  readonly #decoder = new TextDecoder();
  #pending = "";
  #size = 0;

  constructor(head: ResponseHead, on: WatchHandlers, fail: Fail, over: () => boolean) {
    this.#head = head;
    this.#on = on;
    this.#fail = fail;
    this.#over = over;
    // A 200 of another type (a proxy's or load balancer's page) is no watch.
    this.success = head.status >= 200 && head.status < 300 &&
      head.contentType.startsWith("application/json");
  }

  chunk(bytes: Uint8Array): void {
    if (this.#over()) return;
    this.#size += bytes.length;
    this.#pending += this.#decoder.decode(bytes, { stream: true });
    if (!this.success) {
      if (this.#pending.length > ERROR_BODY_BYTES) this.#notAWatch();
      return;
    }
    let newline = this.#pending.indexOf("\n");
    while (newline >= 0 && !this.#over()) {
      this.#line(this.#pending.slice(0, newline));
      this.#pending = this.#pending.slice(newline + 1);
      newline = this.#pending.indexOf("\n");
    }
    if (this.#pending.length > MAX_LINE_BYTES) {
      this.#fail(
        "bad-response",
        `watch event larger than ${MAX_LINE_BYTES} bytes`,
        this.#head.status,
      );
    }
  }

  /** The server ended the answer: true if it was a watch that ended cleanly. */
  end(): boolean {
    if (this.#over()) return false;
    this.#pending += this.#decoder.decode();
    if (!this.success) {
      this.#notAWatch();
      return false;
    }
    this.#line(this.#pending);
    return !this.#over();
  }

  /** The connection failed before the answer's end; `why`, when known. */
  cut(why?: string): void {
    if (this.#over()) return;
    if (!this.success) return this.#notAWatch();
    const because = why === undefined ? "" : ` (${why})`;
    this.#fail(
      "bad-response",
      `watch stream cut short after ${this.#size} bytes${because}: ${bodyStart(this.#pending)}`,
      this.#head.status,
      "body cut short",
    );
  }

  #line(text: string) {
    if (text.trim() === "") return;
    const { status, contentType } = this.#head;
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      return this.#fail(
        "bad-response",
        `watch stream is not JSON (content-type ${contentType}): ${bodyStart(text)}`,
        status,
        `not JSON (${contentType.split(";")[0]})`,
      );
    }
    const event = check(WatchEventSchema, json);
    if (!event.success) {
      return this.#fail(
        "bad-response",
        `not a watch event: ${bodyStart(text)}`,
        status,
        "not a watch event",
      );
    }
    this.#on.event(event.output);
  }

  /** What a body that is not a stream of events says: its error status, or its type. */
  #notAWatch() {
    const { status, statusMessage, contentType } = this.#head;
    if (status < 200 || status >= 300) {
      return this.#fail(...statusFailure(status, statusMessage, this.#pending));
    }
    this.#fail(
      "bad-response",
      `watch answered ${contentType}, not JSON: ${bodyStart(this.#pending)}`,
      status,
      `not JSON (${contentType.split(";")[0]})`,
    );
  }
}

/**
 * The connections watches share, which speak HTTP/2 when the server offers it (the API server
 * does): watches are then streams of a few connections (lib/sources/watch_clients.ts), as the
 * kubelet's are. Only where our connections (and fetch, should the server not pick HTTP/2) can
 * do what the kubeconfig asks: a verified server under its own name, reached directly (the proxy
 * rules are lib/sources/proxy.ts's; fetch would read the variables by its own). Otherwise
 * undefined: watches go over node:https, one HTTP/1.1 connection each.
 */
export function watchClients(
  target: HttpTarget,
  options: { overFetch?: boolean; timers?: Timers } = {},
): WatchClients | undefined {
  const tls = target.tls;
  const direct = (target.proxy ?? { kind: "direct" }).kind === "direct";
  if (!direct || !target.baseUrl.startsWith("https:") || !tls?.verifyServer) return undefined;
  if (tls.serverName !== undefined) return undefined;
  const certified = tls.certPem !== undefined && tls.keyPem !== undefined
    ? { cert: tls.certPem, key: tls.keyPem! }
    : {};
  const caCerts = tls.caPem !== undefined ? { caCerts: [tls.caPem] } : {};
  const url = new URL(target.baseUrl);
  const connect = async (): Promise<Deno.Conn | undefined> => {
    const conn = await Deno.connectTls({
      hostname: bareHost(url.hostname),
      port: portOf(url),
      // http/1.1 too: a server without HTTP/2 may refuse a handshake offering no protocol it has.
      alpnProtocols: ["h2", "http/1.1"],
      ...caCerts,
      ...certified,
    });
    try {
      const { alpnProtocol } = await conn.handshake();
      if (alpnProtocol === "h2") return conn;
    } catch (e) {
      conn.close();
      throw e;
    }
    conn.close();
    return undefined;
  };
  return new WatchClients({
    ...(options.overFetch ? {} : { connect }),
    makeFetch: () => createDirectHttpClient({ http2: true, http1: true, ...caCerts, ...certified }),
    timeoutMs: target.timeoutMs,
    ...(options.timers ? { timers: options.timers } : {}),
  });
}

/** How a watch reaches the server: shared connections, else node:https through a pool. */
export interface WatchVia {
  pool?: ConnectionPool;
  clients?: WatchClients;
}

/** Deno's words for a certificate that does not verify (rustls's errors), from fetch or TLS. */
const RUSTLS_CERTIFICATE_ERROR = /certificate|UnknownIssuer|NotValidForName|Expired/i;

function certificateProblem(message: string): string | undefined {
  return RUSTLS_CERTIFICATE_ERROR.test(message) ? CERTIFICATE_NOT_VERIFIED : undefined;
}

/**
 * Starts a watch of `target.baseUrl + path` (the query says `watch=true`): over `clients` when
 * given, else over node:https through `pool`. The headers must come within the target's
 * timeout; the stream may last as long as the server keeps it.
 */
export function openWatch(
  target: HttpTarget,
  path: string,
  bearerToken: string | undefined,
  via: WatchVia,
  on: WatchHandlers,
): Watch {
  const asked = describeGet(target, path);
  let over = false;
  let release = (_answered: boolean) => {};
  /** `answered`: the server ended the stream, so its connection may serve another call. */
  const finish = (failure?: SourceFailure, answered = false) => {
    if (over) return;
    over = true;
    clearTimeout(deadline);
    release(answered);
    on.ended(failure);
  };
  const fail: Fail = (kind, detail, status, problem = detail) => {
    const result = failed(target.source, kind, `${asked}: ${detail}`, status, problem);
    if (!result.ok) finish(result.failure);
  };
  const deadline = setTimeout(
    () => fail("timeout", `no answer within ${target.timeoutMs} ms`),
    target.timeoutMs,
  );
  const started = (head: ResponseHead): WatchBody => {
    const body = new WatchBody(head, on, fail, () => over);
    if (body.success) {
      clearTimeout(deadline);
      on.opened();
    }
    return body;
  };
  release = via.clients
    ? overClients(target, path, bearerToken, via.clients, started, fail, finish)
    : overNodeHttp(target, path, bearerToken, via.pool, started, fail, finish);
  // Failed as it started, before what frees its connection was known.
  if (over) release(false);
  return {
    close() {
      if (over) return;
      over = true;
      clearTimeout(deadline);
      release(false);
    },
  };
}

type Started = (head: ResponseHead) => WatchBody;
type Finish = (failure?: SourceFailure, answered?: boolean) => void;

/**
 * The watch over the shared connections: a stream of ours, or fetch where the server did not
 * pick HTTP/2; returns what ends it.
 */
function overClients(
  target: HttpTarget,
  path: string,
  bearerToken: string | undefined,
  clients: WatchClients,
  started: Started,
  fail: Fail,
  finish: Finish,
): (answered: boolean) => void {
  let over = false;
  let release: ((answered: boolean) => void) | undefined;
  clients.place().then((placement) => {
    if (over) {
      return placement.kind === "fetch" ? placement.slot.free() : placement.cancel();
    }
    if (placement.kind === "h2") {
      release = overStream(target, path, bearerToken, placement.open, started, fail, finish);
    } else {
      const { slot } = placement;
      const ended = overFetch(target, path, bearerToken, slot.client, started, fail, finish);
      release = (answered) => {
        ended(answered);
        slot.free();
      };
    }
    // Failed as it started.
    if (over) release(false);
  }, (e) => {
    if (over) return;
    const message = reason(e);
    fail("unreachable", message, undefined, certificateProblem(message));
  });
  return (answered) => {
    over = true;
    release?.(answered);
  };
}

/** The watch as a stream of one of our HTTP/2 connections; returns what ends it. */
function overStream(
  target: HttpTarget,
  path: string,
  bearerToken: string | undefined,
  open: (fields: readonly HeaderField[], on: StreamHandlers) => H2Stream,
  started: Started,
  fail: Fail,
  finish: Finish,
): (answered: boolean) => void {
  const url = new URL(target.baseUrl);
  const fields: HeaderField[] = [
    [":method", "GET"],
    [":scheme", "https"],
    [":authority", url.host],
    [":path", `${url.pathname.replace(/\/+$/, "")}${path}`],
    ...Object.entries(getHeaders(bearerToken)),
  ];
  let body: WatchBody | undefined;
  const stream = open(fields, {
    response: (status, headers) => {
      const contentType = headers.find(([name]) => name === "content-type")?.[1] ?? "none";
      body = started({ status, contentType });
    },
    data: (bytes) => body?.chunk(bytes),
    end: () => {
      if (body?.end()) finish(undefined, true);
    },
    failed: (error) => body ? body.cut(error.message) : fail("unreachable", error.message),
  });
  return (answered) => {
    if (!answered) stream.cancel();
  };
}

/** The watch over node:https; returns what frees its connection. */
function overNodeHttp(
  target: HttpTarget,
  path: string,
  bearerToken: string | undefined,
  pool: ConnectionPool | undefined,
  started: Started,
  fail: Fail,
  finish: Finish,
): (answered: boolean) => void {
  const usedPool = target.proxy?.kind === "proxy" ? undefined : pool;
  let sent: SentGet | undefined;
  /** Set once a response started: the connection failing after that cuts it short. */
  let body: WatchBody | undefined;
  const onResponse = (response: http.IncomingMessage) => {
    body = started({
      status: response.statusCode ?? 0,
      statusMessage: response.statusMessage,
      contentType: String(response.headers["content-type"] ?? "none"),
    });
    const reading = body;
    response.on("data", (chunk: Uint8Array) => reading.chunk(chunk));
    response.on("end", () => {
      if (reading.end()) finish(undefined, true);
    });
    // As for a GET (lib/sources/http.ts): each means the stream stopped before its end.
    for (const event of ["aborted", "error", "close"]) response.on(event, () => reading.cut());
  };
  usedPool?.begin();
  let released = false;
  const release = (answered: boolean) => {
    if (released) return;
    released = true;
    if (!(usedPool && answered)) sent?.destroy();
    usedPool?.end();
  };
  const request = sendGet(target, path, bearerToken, usedPool, {
    response: onResponse,
    error: (e) => {
      if (body) return body.cut();
      fail("unreachable", reason(e), undefined, connectionProblem(e));
    },
  });
  if ("kind" in request) fail(request.kind, request.detail);
  else sent = request;
  return release;
}

/** The watch over fetch (HTTP/2 when the server offers it); returns what ends it. */
function overFetch(
  target: HttpTarget,
  path: string,
  bearerToken: string | undefined,
  client: Deno.HttpClient,
  started: Started,
  fail: Fail,
  finish: Finish,
): (answered: boolean) => void {
  const abort = new AbortController();
  const headers = getHeaders(bearerToken);
  const url = `${target.baseUrl.replace(/\/+$/, "")}${path}`;
  fetch(url, { client, headers, signal: abort.signal }).then(async (response) => {
    const body = started({
      status: response.status,
      statusMessage: response.statusText,
      contentType: response.headers.get("content-type") ?? "none",
    });
    // Read into a small buffer of our own, used again and again: a default reader holds a
    // fresh 64 KiB buffer for every read under way, which is most of what a watch costs when
    // hundreds wait at once.
    const reader = response.body?.getReader({ mode: "byob" });
    let buffer = new ArrayBuffer(READ_BYTES);
    try {
      for (;;) {
        const chunk = reader
          ? await reader.read(new Uint8Array(buffer))
          : { done: true as const, value: undefined };
        if (abort.signal.aborted) return;
        if (chunk.done) {
          if (body.end()) finish(undefined, true);
          return;
        }
        body.chunk(chunk.value);
        buffer = chunk.value.buffer as ArrayBuffer;
      }
    } catch {
      if (!abort.signal.aborted) body.cut();
    }
  }, (e) => {
    if (abort.signal.aborted) return;
    const message = reason(e);
    fail("unreachable", message, undefined, certificateProblem(message));
  });
  return (answered) => {
    if (!answered) abort.abort();
  };
}
