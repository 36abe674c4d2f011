/**
 * One watch request, on the wire: a GET whose 200 answer is a stream of JSON events, one per line
 * (`{"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":{...}}`), that lasts until the
 * server ends it at its timeout. Whatever else comes back (an error status, an HTML page, a line
 * that is not an event, a stream cut before its end) ends the watch with a failure, classified as
 * a GET's would be: what a watch's failure means is for its owner (lib/sources/list_watch.ts).
 */
import type http from "node:http";
import { z } from "zod";
import {
  bodyStart,
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

/**
 * Starts a watch of `target.baseUrl + path` (the query says `watch=true`). The headers must come
 * within the target's timeout; the stream may last as long as the server keeps it.
 */
export function openWatch(
  target: HttpTarget,
  path: string,
  bearerToken: string | undefined,
  pool: ConnectionPool | undefined,
  on: WatchHandlers,
): Watch {
  const asked = describeGet(target, path);
  let over = false;
  let sent: SentGet | undefined;
  const usedPool = target.proxy?.kind === "proxy" ? undefined : pool;
  /** `answered`: the server ended the stream, so its connection may serve another call. */
  const finish = (failure?: SourceFailure, answered = false) => {
    if (over) return;
    over = true;
    clearTimeout(deadline);
    if (!(usedPool && answered)) sent?.destroy();
    usedPool?.end();
    on.ended(failure);
  };
  const fail = (kind: FailureKind, detail: string, status?: number, problem = detail) => {
    const result = failed(target.source, kind, `${asked}: ${detail}`, status, problem);
    if (!result.ok) finish(result.failure);
  };
  const deadline = setTimeout(
    () => fail("timeout", `no answer within ${target.timeoutMs} ms`),
    target.timeoutMs,
  );

  /** Set once a response started: the connection failing after that cuts it short. */
  let cutShort: (() => void) | undefined;
  const onResponse = (response: http.IncomingMessage) => {
    if (over) return;
    const status = response.statusCode ?? 0;
    const contentType = String(response.headers["content-type"] ?? "none");
    // A 200 of another type (a proxy's or load balancer's page) is no watch.
    const success = status >= 200 && status < 300 && contentType.startsWith("application/json");
    if (success) {
      clearTimeout(deadline);
      on.opened();
    }
    const decoder = new TextDecoder();
    let pending = "";
    let size = 0;
    const line = (text: string) => {
      if (text.trim() === "") return;
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        return fail(
          "bad-response",
          `watch stream is not JSON (content-type ${contentType}): ${bodyStart(text)}`,
          status,
          `not JSON (${contentType.split(";")[0]})`,
        );
      }
      const event = WatchEventSchema.safeParse(json);
      if (!event.success) {
        return fail(
          "bad-response",
          `not a watch event: ${bodyStart(text)}`,
          status,
          "not a watch event",
        );
      }
      on.event(event.data);
    };
    /** What a body that is not a stream of events says: its error status, or its type. */
    const notAWatch = () => {
      if (status < 200 || status >= 300) {
        return fail(...statusFailure(status, response.statusMessage, pending));
      }
      fail(
        "bad-response",
        `watch answered ${contentType}, not JSON: ${bodyStart(pending)}`,
        status,
        `not JSON (${contentType.split(";")[0]})`,
      );
    };
    cutShort = () => {
      if (over) return;
      if (!success) return notAWatch();
      fail(
        "bad-response",
        `watch stream cut short after ${size} bytes: ${bodyStart(pending)}`,
        status,
        "body cut short",
      );
    };
    response.on("data", (chunk: Uint8Array) => {
      if (over) return;
      size += chunk.length;
      pending += decoder.decode(chunk, { stream: true });
      if (!success) {
        if (pending.length > ERROR_BODY_BYTES) notAWatch();
        return;
      }
      let newline = pending.indexOf("\n");
      while (newline >= 0 && !over) {
        line(pending.slice(0, newline));
        pending = pending.slice(newline + 1);
        newline = pending.indexOf("\n");
      }
      if (pending.length > MAX_LINE_BYTES) {
        fail("bad-response", `watch event larger than ${MAX_LINE_BYTES} bytes`, status);
      }
    });
    response.on("end", () => {
      if (over) return;
      pending += decoder.decode();
      if (!success) return notAWatch();
      line(pending);
      finish(undefined, true);
    });
    // As for a GET (lib/sources/http.ts): each means the stream stopped before its end.
    for (const event of ["aborted", "error", "close"]) response.on(event, cutShort);
  };

  usedPool?.begin();
  const started = sendGet(target, path, bearerToken, usedPool, {
    response: onResponse,
    error: (e) => {
      if (cutShort) return cutShort();
      fail("unreachable", reason(e), undefined, connectionProblem(e));
    },
  });
  if ("kind" in started) fail(started.kind, started.detail);
  else sent = started;
  return {
    close() {
      if (over) return;
      over = true;
      clearTimeout(deadline);
      sent?.destroy();
      usedPool?.end();
    },
  };
}
