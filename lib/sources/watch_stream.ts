/**
 * One watch request, on the wire: a GET whose 200 answer is a stream of JSON events, one per line
 * (`{"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":{...}}`), that lasts until the
 * server ends it at its timeout. Whatever else comes back (an error status, an HTML page, a line
 * that is not an event, a stream cut before its end) ends the watch with a failure, classified as
 * a GET's would be: what a watch's failure means is for its owner (lib/sources/list_watch.ts).
 */
import type http from "node:http";
import { z } from "zod";
import { createDirectHttpClient } from "../util/direct_http.ts";
import {
  bodyStart,
  CERTIFICATE_NOT_VERIFIED,
  type ConnectionPool,
  connectionProblem,
  describeGet,
  type HttpTarget,
  reason,
  sendGet,
  type SentGet,
  statusFailure,
} from "./http.ts";
import { failed, type FailureKind, type SourceFailure } from "./types.ts";

export const WatchEventSchema = z.object({
  type: z.enum(["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]),
  object: z.looseObject({}),
});

export type WatchEvent = z.infer<typeof WatchEventSchema>;

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

  /** The connection failed before the answer's end. */
  cut(): void {
    if (this.#over()) return;
    if (!this.success) return this.#notAWatch();
    this.#fail(
      "bad-response",
      `watch stream cut short after ${this.#size} bytes: ${bodyStart(this.#pending)}`,
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
    const event = WatchEventSchema.safeParse(json);
    if (!event.success) {
      return this.#fail(
        "bad-response",
        `not a watch event: ${bodyStart(text)}`,
        status,
        "not a watch event",
      );
    }
    this.#on.event(event.data);
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
 * How clients for watches over fetch are made, which speak HTTP/2 when the server offers it (the
 * API server does): watches are then streams of a few connections (lib/sources/watch_clients.ts),
 * as the kubelet's are. Only where fetch can do what the kubeconfig asks: a verified server under
 * its own name, reached directly (the proxy rules are lib/sources/proxy.ts's; fetch would read the
 * variables by its own). Otherwise undefined: watches go over node:https, one HTTP/1.1 connection
 * each.
 */
export function watchClientMaker(target: HttpTarget): (() => Deno.HttpClient) | undefined {
  const tls = target.tls;
  const direct = (target.proxy ?? { kind: "direct" }).kind === "direct";
  if (!direct || !target.baseUrl.startsWith("https:") || !tls?.verifyServer) return undefined;
  if (tls.serverName !== undefined) return undefined;
  return () =>
    createDirectHttpClient({
      http2: true,
      http1: true,
      ...(tls.caPem !== undefined ? { caCerts: [tls.caPem] } : {}),
      ...(tls.certPem !== undefined && tls.keyPem !== undefined
        ? { cert: tls.certPem, key: tls.keyPem }
        : {}),
    });
}

/** fetch's words for a certificate that does not verify (rustls's errors). */
const FETCH_CERTIFICATE_ERROR = /certificate|UnknownIssuer|NotValidForName|Expired/i;

/**
 * Starts a watch of `target.baseUrl + path` (the query says `watch=true`): over `client` (fetch)
 * when given, else over node:https through `pool`. The headers must come within the target's
 * timeout; the stream may last as long as the server keeps it.
 */
export function openWatch(
  target: HttpTarget,
  path: string,
  bearerToken: string | undefined,
  via: { pool?: ConnectionPool; client?: Deno.HttpClient },
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
  release = via.client
    ? overFetch(target, path, bearerToken, via.client, started, fail, finish)
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
  const headers: Record<string, string> = {
    accept: "application/json",
    "user-agent": "ckpt-agent",
    ...(bearerToken !== undefined ? { authorization: `Bearer ${bearerToken}` } : {}),
  };
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
    const problem = FETCH_CERTIFICATE_ERROR.test(message) ? CERTIFICATE_NOT_VERIFIED : undefined;
    fail("unreachable", message, undefined, problem);
  });
  return (answered) => {
    if (!answered) abort.abort();
  };
}
