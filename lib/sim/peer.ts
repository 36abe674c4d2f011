/**
 * What the simulated API server and kubelet share: a real HTTP(S) server on loopback that
 * authenticates like the real ones, logs what it was asked, and can be made to fail the way they
 * do during an outage — error statuses, a request that is never answered, or a closed port.
 *
 * Authentication follows the Go servers (tls.VerifyClientCertIfGiven): a client certificate is
 * requested; one that the client CA did not sign ends the handshake; without one, a request
 * needs an accepted bearer token, or it is answered 401.
 *
 * Two halves, because neither of Deno's servers does it all. node:tls (or node:net, for plain
 * HTTP) accepts the connections: it can ask for a client certificate, which Deno.serve cannot,
 * and it picks the protocol by ALPN. Each connection, decrypted, is then piped to a Deno.serve
 * (hyper) server on another loopback port, which speaks HTTP/1.1 and HTTP/2 with prior knowledge
 * there. Not node:http2: in Deno 2.9 a GOAWAY on one of its sessions can abort or segfault the
 * whole process (denoland/deno#36788), and every test file runs in one process; with it,
 * tests/sim/peer_drop_probe.ts died in every run, with this it survives. The outer connection is
 * found again from the inner one's port, which is where the client's identity and the means to
 * drop the connection are kept. One difference from the Go servers: an idle connection stays
 * open until the client closes it, not 90 s.
 */
import net from "node:net";
import tls from "node:tls";
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
  /** What the connection speaks: "h2" or "http/1.1". */
  protocol: string;
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

/** The first event of a watch a "truncated" fault cuts halfway. */
const CUT_EVENT = { type: "ADDED", object: { kind: "Pod", apiVersion: "v1", metadata: {} } };

const encoder = new TextEncoder();

/** An accepted connection, as the requests piped in over it find it. */
interface Connection {
  /** `cert:<CN>` when the client presented a certificate the client CA signed. */
  certificate?: string;
  protocol: string;
  /** Drops it, as a server that dies does. */
  drop(): void;
  /** Resolves once it is closed, whichever side closed it. */
  closed: Promise<void>;
}

/** Chunked, as Go's server sends a watch: no Content-Length, each value flushed as written. */
function sendStream(
  response: PeerResponse & { stream: (out: PeerStream) => void },
  connection: Connection | undefined,
  headers: Headers,
): Response {
  headers.set("content-type", "application/json");
  let over = false;
  const listeners: (() => void)[] = [];
  const closed = () => {
    if (over) return;
    over = true;
    for (const listener of listeners) listener();
  };
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      response.stream({
        write: (value) => {
          if (!over) controller.enqueue(encoder.encode(`${jsonText(value)}\n`));
        },
        end: () => {
          if (!over) controller.close();
          closed();
        },
        drop: () => {
          connection?.drop();
          closed();
        },
        onClose: (listener) => listeners.push(listener),
      });
    },
    // The client went away, or its connection was dropped.
    cancel: closed,
  });
  return new Response(body, { status: response.status, headers });
}

/** `cutHalfway`: send half the body (of a watch: of its first event), then end it. */
function send(
  response: PeerResponse,
  connection: Connection | undefined,
  headers: Headers,
  options: { contentType?: string; cutHalfway?: boolean } = {},
): Response {
  if (response.stream && !options.cutHalfway) {
    return sendStream({ ...response, stream: response.stream }, connection, headers);
  }
  const text = typeof response.body === "string";
  const payload = encoder.encode(
    response.stream
      ? `${jsonText(CUT_EVENT)}\n`
      : text
      ? response.body as string
      : jsonText(response.body),
  );
  headers.set(
    "content-type",
    options.contentType ?? (text ? "text/plain; charset=utf-8" : "application/json"),
  );
  if (options.cutHalfway) return cut(payload, response.status, headers);
  headers.set("content-length", String(payload.length));
  return new Response(payload, { status: response.status, headers });
}

/**
 * The first half of `payload`, its Content-Length promising the whole: hyper sends what there
 * is, then ends the connection (HTTP/1.1) or resets the stream (HTTP/2) without the rest.
 */
function cut(payload: Uint8Array, status: number, headers: Headers): Response {
  headers.set("content-length", String(payload.length));
  const half = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(payload.subarray(0, Math.floor(payload.length / 2)));
      controller.close();
    },
  });
  return new Response(half, { status, headers });
}

/** The 200 answers of the faults that answer with what is not the answer. */
function answerFault(
  fault: "html" | "truncated" | "wrong-kind",
  real: PeerResponse,
  connection: Connection | undefined,
  headers: Headers,
): Response {
  switch (fault) {
    case "html":
      return send({ status: 200, body: LOAD_BALANCER_PAGE }, connection, headers, {
        contentType: "text/html; charset=utf-8",
      });
    case "wrong-kind":
      return send({ status: 200, body: WRONG_KIND_BODY }, connection, headers);
    case "truncated":
      return send(real, connection, headers, { cutHalfway: true });
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

function hasPeerCertificate(socket: tls.TLSSocket): boolean {
  return Object.keys(socket.getPeerCertificate() ?? {}).length > 0;
}

/** Path and query of a request's URL, as sent (Deno.serve puts scheme and authority before). */
function targetOf(url: string): string {
  const path = url.indexOf("/", url.indexOf("//") + 2);
  return path < 0 ? "/" : url.slice(path);
}

/** The ports this process's peers hold, listening or stopped: never given to another peer. */
const HELD_PORTS = new Set<number>();

/**
 * A peer's port, kept across stopListening and resumeListening as a restarted server keeps its
 * own: below the kernel's ephemeral ports (Linux's default range starts at 32768; the real one,
 * /proc/sys/net/ipv4/ip_local_port_range, is not readable under the demo's permissions), so that
 * no outgoing connection (every connection a peer accepts makes one, to its inner server) can be
 * given it while the peer is stopped: a port from the ephemeral range was, and the peer's
 * resumeListening failed with EADDRINUSE.
 */
function heldPort(): number {
  const [lowest, ephemeral] = [10_000, 32_768];
  for (;;) {
    const port = lowest + Math.floor(Math.random() * (ephemeral - lowest));
    if (HELD_PORTS.has(port)) continue;
    HELD_PORTS.add(port);
    return port;
  }
}

export async function startSimPeer(options: SimPeerOptions): Promise<SimPeer> {
  const host = options.host ?? "127.0.0.1";
  const requests: RecordedRequest[] = [];
  /** Every accepted socket, until it closes; with TLS, before its handshake too. */
  const sockets = new Set<net.Socket>();
  /** The connections piped to the inner server, by the inner connection's local port. */
  const piped = new Map<number, Connection>();
  let accepted = 0;
  let tokens = new Set<string>();
  let fault: PeerFault = "none";
  let clockSkewMs = 0;
  let port = 0;
  let server: net.Server | undefined;

  function authenticate(req: Request, connection: Connection | undefined): string | undefined {
    if (!options.tls) return undefined;
    if (connection?.certificate !== undefined) return connection.certificate;
    const header = req.headers.get("authorization") ?? "";
    const token = header.startsWith("Bearer ") ? header.slice("Bearer ".length) : "";
    return tokens.has(token) ? `token:${token}` : undefined;
  }

  function onRequest(
    req: Request,
    info: Deno.ServeHandlerInfo<Deno.NetAddr>,
  ): Promise<Response> | Response {
    const connection = piped.get(info.remoteAddr.port);
    const target = targetOf(req.url);
    const url = new URL(target, "http://sim");
    const request: PeerRequest = {
      method: req.method,
      path: url.pathname,
      segments: url.pathname.split("/").filter((s) => s !== "").map(decodeSegment),
      query: url.searchParams,
    };
    const authenticatedAs = authenticate(req, connection);
    const bearer = /^Bearer (.*)$/.exec(req.headers.get("authorization") ?? "")?.[1];
    requests.push({
      method: req.method,
      target,
      ...(authenticatedAs !== undefined ? { authenticatedAs } : {}),
      ...(bearer !== undefined ? { bearerToken: bearer } : {}),
      protocol: connection?.protocol ?? "http/1.1",
    });
    // Never answered: the handler returns once its connection is gone, so that the server can
    // shut down.
    if (fault === "hang") {
      return (connection?.closed ?? Promise.resolve()).then(() => new Response(null));
    }
    const headers = new Headers();
    // Otherwise hyper sends the date of the machine's own clock.
    if (clockSkewMs !== 0) headers.set("date", new Date(Date.now() + clockSkewMs).toUTCString());
    if (fault === "server-error" || fault === "unauthorized" || fault === "forbidden") {
      return send(options.failure(fault, request), connection, headers);
    }
    if (options.tls && authenticatedAs === undefined) {
      return send(options.failure("unauthorized", request), connection, headers);
    }
    if (fault === "none") return send(options.handle(request), connection, headers);
    return answerFault(fault, options.handle(request), connection, headers);
  }

  // Lives as long as the peer: stopping and resuming only closes and opens the outer port.
  const inner = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, onRequest);

  /** Pipes an accepted (and, with TLS, decrypted) connection to the inner server. */
  function pipe(outer: net.Socket, certificate: string | undefined, protocol: string): void {
    outer.pause();
    const link = net.connect(inner.addr.port, "127.0.0.1");
    let close = () => {};
    const connection: Connection = {
      ...(certificate !== undefined ? { certificate } : {}),
      protocol,
      drop: () => {
        outer.destroy();
        link.destroy();
      },
      closed: new Promise<void>((resolve) => close = resolve),
    };
    link.on("connect", () => {
      piped.set(link.localPort!, connection);
      outer.pipe(link);
      link.pipe(outer);
      outer.resume();
    });
    outer.on("close", () => link.destroy());
    link.on("close", () => {
      piped.delete(link.localPort!);
      // What hyper wrote before it closed is still on its way out: ended, not destroyed.
      outer.end();
      close();
    });
    // A connection reset is how a client or hyper ends one; either way it is closed.
    outer.on("error", () => link.destroy());
    link.on("error", () => outer.destroy());
  }

  function createServer(): net.Server {
    if (!options.tls) {
      return net.createServer((socket) => pipe(socket, undefined, "http/1.1"));
    }
    const created = tls.createServer({
      cert: options.tls.certPem,
      key: options.tls.keyPem,
      ca: options.tls.clientCaPem,
      requestCert: true,
      rejectUnauthorized: false,
      // HTTP/2 where the client offers it, HTTP/1.1 otherwise, as Go's servers do.
      ...(options.http2 ? { ALPNProtocols: ["h2", "http/1.1"] } : {}),
    });
    created.on("secureConnection", (socket: tls.TLSSocket) => {
      if (!socket.authorized && hasPeerCertificate(socket)) return void socket.destroy();
      const certificate = socket.authorized
        ? `cert:${socket.getPeerCertificate().subject?.CN ?? ""}`
        : undefined;
      pipe(socket, certificate, socket.alpnProtocol || "http/1.1");
    });
    // A client that gives up mid-handshake is its business, not the simulation's.
    created.on("tlsClientError", () => {});
    return created;
  }

  async function listen(): Promise<void> {
    const created = createServer();
    created.on("connection", (socket: net.Socket) => {
      accepted++;
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => socket.destroy());
    });
    const bind = (at: number) =>
      new Promise<void>((resolve, reject) => {
        created.once("error", reject);
        created.listen(at, host, () => {
          created.off("error", reject);
          resolve();
        });
      });
    if (port !== 0) await bind(port);
    else {
      for (let attempt = 1;; attempt++) {
        const at = heldPort();
        try {
          await bind(at);
          break;
        } catch (error) {
          HELD_PORTS.delete(at);
          if ((error as { code?: string }).code !== "EADDRINUSE" || attempt === 100) throw error;
        }
      }
    }
    port = (created.address() as net.AddressInfo).port;
    server = created;
  }

  async function stopListening(): Promise<void> {
    const closing = server;
    if (!closing) return;
    server = undefined;
    const closed = new Promise<void>((resolve) => closing.close(() => resolve()));
    for (const socket of sockets) socket.destroy();
    for (const connection of piped.values()) connection.drop();
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
    close: async () => {
      await stopListening();
      await inner.shutdown();
      HELD_PORTS.delete(port);
    },
  };
}
