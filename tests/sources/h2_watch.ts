/** A watch over our HTTP/2 connections, with what it was told kept for the test to look at. */
import type { HttpTarget } from "../../lib/sources/http.ts";
import type { SourceFailure } from "../../lib/sources/types.ts";
import type { WatchClients } from "../../lib/sources/watch_clients.ts";
import { openWatch, type WatchEvent } from "../../lib/sources/watch_stream.ts";

export interface SeenWatch {
  opened: boolean;
  events: WatchEvent[];
  /** Set once it ended: `failure` unset for a clean end. */
  ended?: { failure?: SourceFailure };
  close(): void;
}

export function watchOf(
  target: HttpTarget,
  clients: WatchClients,
  path: string,
  bearerToken?: string,
): SeenWatch {
  const seen: SeenWatch = { opened: false, events: [], close: () => watch.close() };
  const watch = openWatch(target, path, bearerToken, { clients }, {
    opened: () => seen.opened = true,
    event: (event) => seen.events.push(event),
    ended: (failure) => seen.ended = failure ? { failure } : {},
  });
  return seen;
}

export function targetFor(
  port: number,
  tls: { caPem: string; certPem: string; keyPem: string },
): HttpTarget {
  return {
    source: "apiserver",
    baseUrl: `https://127.0.0.1:${port}`,
    timeoutMs: 5_000,
    tls: { verifyServer: true, ...tls },
  };
}
