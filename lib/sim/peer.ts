/**
 * What the simulated API server and kubelet share: a real node:http(s) server on loopback that
 * authenticates like the real ones, logs what it was asked, and can be made to fail the way they
 * do during an outage — error statuses, a request that is never answered, or a closed port.
 *
 * Authentication follows the Go servers (tls.VerifyClientCertIfGiven): a client certificate is
 * requested; one that the client CA did not sign ends the handshake; without one, a request
 * needs an accepted bearer token, or it is answered 401.
 */
import http from "node:http";
import http2 from "node:http2";
import https from "node:https";
import type { Socket } from "node:net";
import type { TLSSocket } from "node:tls";
import { jsonText } from "../util/json_text.ts";

/**
 * How a peer misbehaves. "hang" accepts the request and never answers. The others answer 200
 * with what is not the answer, as something between the agent and the peer may: "html", a
 * load balancer's page; "truncated", the real answer cut off halfway, its Content-Length
 * promising the whole, then the connection closed; "wrong-kind", JSON of another kind (a list
 * with `items`, so that only its kind tells it from an empty pod list).
 */
export type PeerFault =
  | "none"
  | "server-error"
  | "unauthorized"
  | "forbidden"
  | "hang"
  | "html"
  | "truncated"
  | "wrong-kind";

/** The page a load balancer answers in front of a backend it cannot reach. */
export const LOAD_BALANCER_PAGE = "<!DOCTYPE html>\n<html><head><title>Service Unavailable" +
  "</title></head>\n<body><h1>Service Unavailable</h1>\n<p>The backend is under maintenance." +
  "</p></body></html>\n";

/** JSON of another kind than asked: it has `items`, like every list. */
export const WRONG_KIND_BODY = { kind: "SecretList", apiVersion: "v1", metadata: {}, items: [] };

export interface PeerRequest {
  method: string;
  /** The path as sent, without the query. */
  path: string;
  /** The path's segments, each decoded (so an encoded `/` stays inside its segment). */
  segments: string[];
  query: URLSearchParams;
}

/** An answer written as things happen (a watch): one JSON value per line, as chunks. */
export interface PeerStream {
  write(value: unknown): void;
  /** Ends the answer cleanly: the connection stays open for the next request. */
  end(): void;
  /** Drops the connection, as a server that dies does. */
  drop(): void;
  /** Told once when the answer is over, whichever side ended it. */
  onClose(listener: () => void): void;
}

/** An object is sent as JSON, a string as text/plain; with `stream`, the body is not sent. */
export interface PeerResponse {
  status: number;
  body: unknown;
  /** Writes the answer after its headers, for as long as it lasts. */
  stream?: (out: PeerStream) => void;
}

export interface RecordedRequest {
  method: string;
  /** Path and query exactly as sent. */
  target: string;
  /** `cert:<CN>`, `token:<token>`, or unset when the request was not authenticated. */
  authenticatedAs?: string;
  /** The bearer token the request carried, accepted or not. */
  bearerToken?: string;
}

export interface PeerTls {
  certPem: string;
  keyPem: string;
  /** Client certificates must be signed by this CA. */
  clientCaPem: string;
}

export interface SimPeerOptions {
  /** Loopback address to listen on: 127.0.0.1 (default) or ::1. */
  host?: "127.0.0.1" | "::1";
  /** Unset: plain HTTP and no authentication (a kubelet's read-only port). */
  tls?: PeerTls;
  /** With tls: HTTP/2 to clients that offer it, HTTP/1.1 to the others. */
  http2?: boolean;
  handle(request: PeerRequest): PeerResponse;
  /** The answer to a request that failed authentication (401) or that a fault answers. */
  failure(fault: "server-error" | "unauthorized" | "forbidden", request: PeerRequest): PeerResponse;
}

export interface PeerControl {
  /** `https://127.0.0.1:<port>` (or http:, or [::1]). The port stays the same across stop and
   *  resume. */
  readonly url: string;
  readonly port: number;
  setFault(fault: PeerFault): void;
  /** The peer's clock is off by this much (negative: behind): its `Date` headers say so. */
  setClockSkew(ms: number): void;
  /** Bearer tokens that authenticate a request without a client certificate. */
  acceptTokens(tokens: string[]): void;
  /** Closes the port and drops every open connection, as when the process dies. */
  stopListening(): Promise<void>;
  resumeListening(): Promise<void>;
  /** Requests received so far (including unanswered ones), in order. */
  readonly requests: readonly RecordedRequest[];
  /** How many requests asked for this path (query ignored). */
  requestCount(path: string): number;
  /** Connections accepted since the start, and those still open. */
  connections(): { accepted: number; open: number };
}

export interface SimPeer extends PeerControl {
  close(): Promise<void>;
}

/** The start of a watch event, where a "truncated" fault cuts a stream. */
const CUT_EVENT = '{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"na';

/** Chunked, as Go's server sends a watch: no Content-Length, each value flushed as written. */
function sendStream(
  res: http.ServerResponse,
  response: PeerResponse & { stream: (out: PeerStream) => void },
  cutHalfway: boolean,
): void {
  res.writeHead(response.status, { "content-type": "application/json" });
  res.flushHeaders();
  if (cutHalfway) {
    res.write(CUT_EVENT, () => res.socket?.destroy());
    return;
  }
  let over = false;
  const listeners: (() => void)[] = [];
  const closed = () => {
    if (over) return;
    over = true;
    for (const listener of listeners) listener();
  };
  res.on("close", closed);
  response.stream({
    write: (value) => {
      if (!over) res.write(`${jsonText(value)}\n`);
    },
    end: () => {
      if (!over) res.end();
      closed();
    },
    drop: () => {
      res.socket?.destroy();
      closed();
    },
    onClose: (listener) => listeners.push(listener),
  });
}

/** `cutHalfway`: send half the body, then close the connection. */
function send(
  res: http.ServerResponse,
  response: PeerResponse,
  options: { contentType?: string; cutHalfway?: boolean } = {},
): void {
  if (response.stream) {
    return sendStream(res, { ...response, stream: response.stream }, options.cutHalfway ?? false);
  }
  const text = typeof response.body === "string";
  const payload = new TextEncoder().encode(
    text ? response.body as string : jsonText(response.body),
  );
  res.writeHead(response.status, {
    "content-type": options.contentType ??
      (text ? "text/plain; charset=utf-8" : "application/json"),
    "content-length": payload.length,
  });
  if (!options.cutHalfway) return void res.end(payload);
  res.write(payload.subarray(0, Math.floor(payload.length / 2)), () => res.socket?.destroy());
}

/** The 200 answers of the faults that answer with what is not the answer. */
function answerFault(
  res: http.ServerResponse,
  fault: "html" | "truncated" | "wrong-kind",
  real: PeerResponse,
): void {
  switch (fault) {
    case "html":
      return send(res, { status: 200, body: LOAD_BALANCER_PAGE }, {
        contentType: "text/html; charset=utf-8",
      });
    case "wrong-kind":
      return send(res, { status: 200, body: WRONG_KIND_BODY });
    case "truncated":
      return send(res, real, { cutHalfway: true });
  }
}

/** A malformed escape stays as sent: it then matches no route, as on a real server. */
function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

function hasPeerCertificate(socket: TLSSocket): boolean {
  return Object.keys(socket.getPeerCertificate() ?? {}).length > 0;
}

export async function startSimPeer(options: SimPeerOptions): Promise<SimPeer> {
  const host = options.host ?? "127.0.0.1";
  const requests: RecordedRequest[] = [];
  const sockets = new Set<Socket>();
  let accepted = 0;
  let tokens = new Set<string>();
  let fault: PeerFault = "none";
  let clockSkewMs = 0;
  let port = 0;
  let server: http.Server | undefined;

  function authenticate(req: http.IncomingMessage): string | undefined {
    if (!options.tls) return undefined;
    const socket = req.socket as TLSSocket;
    if (socket.authorized) return `cert:${socket.getPeerCertificate().subject?.CN ?? ""}`;
    const header = req.headers.authorization ?? "";
    const token = header.startsWith("Bearer ") ? header.slice("Bearer ".length) : "";
    return tokens.has(token) ? `token:${token}` : undefined;
  }

  function onRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? "/", "http://sim");
    const request: PeerRequest = {
      method: req.method ?? "",
      path: url.pathname,
      segments: url.pathname.split("/").filter((s) => s !== "").map(decodeSegment),
      query: url.searchParams,
    };
    const authenticatedAs = authenticate(req);
    const bearer = /^Bearer (.*)$/.exec(req.headers.authorization ?? "")?.[1];
    requests.push({
      method: req.method ?? "",
      target: req.url ?? "",
      ...(authenticatedAs !== undefined ? { authenticatedAs } : {}),
      ...(bearer !== undefined ? { bearerToken: bearer } : {}),
    });
    if (fault === "hang") return;
    // Otherwise node:http sends the date of the machine's own clock.
    if (clockSkewMs !== 0) res.setHeader("date", new Date(Date.now() + clockSkewMs).toUTCString());
    if (fault === "server-error" || fault === "unauthorized" || fault === "forbidden") {
      return send(res, options.failure(fault, request));
    }
    if (options.tls && authenticatedAs === undefined) {
      return send(res, options.failure("unauthorized", request));
    }
    if (fault === "none") return send(res, options.handle(request));
    answerFault(res, fault, options.handle(request));
  }

  function createServer(): http.Server {
    const tls = options.tls && {
      cert: options.tls.certPem,
      key: options.tls.keyPem,
      ca: options.tls.clientCaPem,
      requestCert: true,
      rejectUnauthorized: false,
    };
    // HTTP/2 where the client offers it (ALPN), HTTP/1.1 otherwise, as Go's servers do.
    const created = tls && options.http2
      ? http2.createSecureServer(
        { ...tls, allowHTTP1: true },
        onRequest as unknown as Parameters<typeof http2.createSecureServer>[1],
      ) as unknown as http.Server
      : tls
      ? https.createServer(tls, onRequest)
      : http.createServer(onRequest);
    created.on("connection", (socket: Socket) => {
      accepted++;
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
    });
    created.on("secureConnection", (socket: TLSSocket) => {
      if (!socket.authorized && hasPeerCertificate(socket)) socket.destroy();
    });
    // A client that gives up mid-handshake is its business, not the simulation's.
    created.on("tlsClientError", () => {});
    created.on("clientError", (_e, socket) => socket.destroy());
    // So is an HTTP/2 client that resets its streams or drops the connection as it exits.
    created.on("session", (session: http2.Http2Session) => session.on("error", () => {}));
    created.on("stream", (stream: http2.Http2Stream) => stream.on("error", () => {}));
    return created;
  }

  async function listen(): Promise<void> {
    const created = createServer();
    // An idle connection stays open as long as the kubelet's and the API server's own servers
    // keep one (Go's http.Server with IdleTimeout 90 s), not node:http's 5 s.
    created.keepAliveTimeout = 90_000;
    await new Promise<void>((resolve, reject) => {
      created.once("error", reject);
      created.listen(port, host, () => {
        created.off("error", reject);
        resolve();
      });
    });
    port = (created.address() as { port: number }).port;
    server = created;
  }

  async function stopListening(): Promise<void> {
    const closing = server;
    if (!closing) return;
    server = undefined;
    const closed = new Promise<void>((resolve) => closing.close(() => resolve()));
    for (const socket of sockets) socket.destroy();
    await closed;
  }

  await listen();
  const scheme = options.tls ? "https" : "http";

  return {
    url: `${scheme}://${host.includes(":") ? `[${host}]` : host}:${port}`,
    port,
    setFault: (next) => {
      fault = next;
    },
    setClockSkew: (ms) => {
      clockSkewMs = ms;
    },
    acceptTokens: (list) => {
      tokens = new Set(list);
    },
    stopListening,
    resumeListening: async () => {
      if (!server) await listen();
    },
    requests,
    requestCount: (path) =>
      requests.filter((r) => new URL(r.target, "http://sim").pathname === path).length,
    connections: () => ({ accepted, open: sockets.size }),
    close: stopListening,
  };
}
