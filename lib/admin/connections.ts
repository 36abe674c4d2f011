/**
 * The admin endpoint's connections: accepted by a loop of our own on a Deno listener (TCP or unix
 * socket alike), bounded in number, timed while they wait on their client, and handed to
 * node:http, which reads and writes the HTTP/1.1 itself; each request goes to a fetch handler
 * (the Hono app) as a Request. One request per connection: every answer says
 * `Connection: close`.
 *
 * The measured need (Deno 2.9.6; docs/admin.md#limits):
 * - Deno.serve has no timeout of any kind and no bound: 300 connections that never sent a byte
 *   were all still open 40 s later, and at the process's descriptor limit its accept error
 *   (EMFILE) is thrown uncaught and ends the agent.
 * - node:http listening on its own has working timeouts (headersTimeout closed the same 300
 *   connections), but under `prlimit --nofile=200` its accept loop stopped for good at EMFILE,
 *   with no 'error' event: of 400 connections 176 were served, and after they closed no
 *   connection was ever accepted again.
 * - Deno.listen's accept() rejects with EMFILE and accepts again once descriptors are free, and
 *   node:http serves any duplex stream it is given as a connection: so the accept loop, the bound
 *   and the timers are ours, and no HTTP is parsed or written here.
 *
 * Why no keep-alive: node:http in Deno closes a connection after each answer when the server did
 * not listen itself, though the answer said `keep-alive` (measured: the client's second request on
 * it met a broken pipe); and the endpoint's clients (probes, Prometheus, `ckpt-agent status`) gain
 * nothing from it, while an idle kept-alive connection is what an attacker holds.
 */
import { Buffer } from "node:buffer";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { Duplex } from "node:stream";
import type { Logger } from "../util/log.ts";
import type { Timers } from "../util/timers.ts";

export interface ConnectionLimits {
  /** Connections served at once; any beyond are closed as soon as they are accepted. */
  maxConnections: number;
  /**
   * How long the endpoint waits on a client, each time it does: for the request's head (so a
   * connection that sends nothing, or dribbles a head, is closed after it); for its body, from
   * the head; for the client to take each part of the answer; and for it to close the connection
   * after the answer. The endpoint's own work (a request that waits for a pass) has no limit.
   */
  clientTimeoutMs: number;
}

/** Ample for probes, Prometheus and an operator; a small share of the descriptors the agent
 *  needs for its own work at any sensible limit (systemd's default soft limit is 1024). */
export const CONNECTION_LIMITS: ConnectionLimits = { maxConnections: 32, clientTimeoutMs: 5_000 };

/** After a failed accept (EMFILE, ENFILE, …) the loop waits this long, doubled each time. */
const ACCEPT_BACKOFF_MS = { first: 50, max: 2_000 };

/** What a connection closed at the client timeout was waiting for. */
type Wait = "no request" | "no request body" | "answer not taken" | "left open";

export interface Served {
  /**
   * Stops accepting, closes the connections with no request under way, and lets those under way
   * be answered; resolves once every connection is closed.
   */
  close(): Promise<void>;
}

/** The handler never throws: an error of its own is already an answer (500). */
export type FetchHandler = (request: Request) => Promise<Response>;

export function serveConnections(opts: {
  listener: Deno.Listener;
  fetch: FetchHandler;
  limits: ConnectionLimits;
  timers: Timers;
  log: Logger;
}): Served {
  const { listener, limits, timers, log } = opts;
  const open = new Set<Connection>();
  let closing = false;
  let full = false;
  let allClosed: (() => void) | undefined;
  /** Ends the accept loop's pause early, at close. */
  let wake: (() => void) | undefined;

  // node:http's own timeouts run only for a server that listens itself: the waits are ours.
  const http = createServer((req: IncomingMessage, res: ServerResponse) => {
    // The socket is the stream this server was given as the connection.
    if (!(req.socket as unknown as Connection).begin(req, res)) return;
    answer(req, res, opts.fetch).catch((e) => {
      log.error("admin: the answer could not be sent", { error: (e as Error).message });
      res.destroy();
    });
  });

  const closed = (connection: Connection) => {
    open.delete(connection);
    if (full && open.size < limits.maxConnections) {
      full = false;
      log.info("admin: below the connection limit again", { open: open.size });
    }
    if (closing && open.size === 0) allClosed?.();
  };

  const accepting = (async () => {
    let failed = 0;
    let pauseMs = ACCEPT_BACKOFF_MS.first;
    while (!closing) {
      let conn: Deno.Conn;
      try {
        conn = await listener.accept();
      } catch (e) {
        if (closing) break;
        // At the descriptor limit the connection stays queued and accept fails again at once:
        // said once, then tried again after a pause, for as long as it lasts.
        if (failed++ === 0) {
          log.error("admin: cannot accept connections; trying again", {
            error: (e as Error).message,
          });
        }
        await new Promise<void>((resolve) => {
          const cancel = timers.after(pauseMs, resolve);
          wake = () => (cancel(), resolve());
        });
        pauseMs = Math.min(pauseMs * 2, ACCEPT_BACKOFF_MS.max);
        continue;
      }
      if (failed > 0) {
        log.info("admin: accepting connections again", { failedAccepts: failed });
        failed = 0;
        pauseMs = ACCEPT_BACKOFF_MS.first;
      }
      if (open.size >= limits.maxConnections) {
        if (!full) {
          full = true;
          log.warn("admin: connection limit reached; connections beyond it are closed", {
            limit: limits.maxConnections,
          });
        }
        closeQuietly(conn);
        continue;
      }
      const connection = new Connection(conn, limits.clientTimeoutMs, timers, log);
      open.add(connection);
      connection.once("close", () => closed(connection));
      http.emit("connection", connection);
    }
  })();

  return {
    async close() {
      closing = true;
      closeQuietly(listener);
      wake?.();
      await accepting;
      const drained = new Promise<void>((resolve) => allClosed = resolve);
      for (const connection of open) connection.closeWhenAnswered();
      if (open.size > 0) await drained;
    },
  };
}

/**
 * One accepted connection as node:http reads and writes it, and what it waits for from its
 * client, if anything.
 */
class Connection extends Duplex {
  readonly #conn: Deno.Conn;
  readonly #buffer = new Uint8Array(16 * 1024);
  readonly #timeoutMs: number;
  readonly #timers: Timers;
  readonly #log: Logger;
  #stopWaiting?: () => void;
  #begun = false;
  #underWay = false;
  #closeWhenAnswered = false;

  constructor(conn: Deno.Conn, timeoutMs: number, timers: Timers, log: Logger) {
    super();
    this.#conn = conn;
    this.#timeoutMs = timeoutMs;
    this.#timers = timers;
    this.#log = log;
    // A client's connection failing is never the agent's error.
    this.on("error", () => {});
    this.#wait("no request");
  }

  /**
   * The request's head has come: it is answered with no time limit, but its body must come
   * within the client timeout. (Whether it has is asked when the time is up: node:http tells of
   * a complete body only through `req.complete`, and of its end only to a reader.) False for a
   * second request on the connection, which is not answered: the connection closes after the
   * first answer, as that answer said.
   */
  begin(req: IncomingMessage, res: ServerResponse): boolean {
    if (this.#begun) {
      this.closeWhenAnswered();
      return false;
    }
    this.#begun = true;
    this.#underWay = true;
    this.#wait("no request body", () => req.complete);
    res.once("close", () => {
      this.#underWay = false;
      if (this.#closeWhenAnswered) this.destroy();
      // A body still coming is left to its deadline.
      else if (req.complete) this.#wait("left open");
    });
    return true;
  }

  /** At shutdown: closed now, or once its answer is sent. */
  closeWhenAnswered() {
    if (this.#underWay) this.#closeWhenAnswered = true;
    else this.destroy();
  }

  /** Closes the connection in the client timeout, unless `came` says by then that the wait is
   *  over; after the answer, the client then has a client timeout to close it. */
  #wait(what: Wait | undefined, came?: () => boolean) {
    this.#stopWaiting?.();
    this.#stopWaiting = what && this.#timers.after(this.#timeoutMs, () => {
      this.#stopWaiting = undefined;
      if (!came?.()) this.#cut(what);
      else if (!this.#underWay) this.#wait("left open");
    });
  }

  #cut(why: Wait) {
    this.#log.debug("admin: connection closed", { why, timeoutMs: this.#timeoutMs });
    this.destroy();
  }

  override _read() {
    this.#conn.read(this.#buffer).then(
      (n) => this.push(n === null ? null : Buffer.from(this.#buffer.subarray(0, n))),
      (e) => this.destroy(e),
    );
  }

  override _write(chunk: Buffer, _encoding: string, done: (error?: Error | null) => void) {
    const stop = this.#timers.after(this.#timeoutMs, () => this.#cut("answer not taken"));
    writeAll(this.#conn, chunk).then(
      () => (stop(), done()),
      (e) => (stop(), done(e)),
    );
  }

  override _final(done: () => void) {
    this.#conn.closeWrite().then(done, done);
  }

  override _destroy(error: Error | null, done: (error: Error | null) => void) {
    this.#wait(undefined);
    closeQuietly(this.#conn);
    done(error);
  }
}

/**
 * Answers a request as Deno.serve handed it to the app: the URL is the target as sent, not
 * resolved (dot segments, encoded slashes and all), since app.ts judges ids on it; the body a
 * stream read as the app asks for it. What the app left of the body is read and dropped, within
 * the body's deadline.
 */
async function answer(req: IncomingMessage, res: ServerResponse, fetch: FetchHandler) {
  const body = new RequestBody(req);
  let response: Response;
  try {
    response = await fetch(toRequest(req, body));
  } catch (e) {
    // Nothing fetch can carry: a method it forbids (CONNECT, TRACE), a header it refuses.
    response = Response.json({ error: `bad request: ${(e as Error).message}` }, { status: 400 });
  }
  const bytes = new Uint8Array(await response.arrayBuffer());
  if (!req.complete) body.drop();
  for (const [name, value] of response.headers) res.setHeader(name, value);
  res.setHeader("Connection", "close");
  res.statusCode = response.status;
  res.end(bytes);
}

function toRequest(req: IncomingMessage, body: RequestBody): Request {
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    headers.append(req.rawHeaders[i], req.rawHeaders[i + 1]);
  }
  const target = req.url ?? "";
  if (!target.startsWith("/") && !/^https?:\/\//i.test(target)) {
    throw new Error(`not a request target: ${JSON.stringify(target.slice(0, 64))}`);
  }
  const method = req.method ?? "GET";
  const request = new Request("http://localhost/", {
    method,
    headers,
    ...(method === "GET" || method === "HEAD" ? {} : { body: body.stream(), duplex: "half" }),
  });
  const url = target.startsWith("/")
    ? `http://${req.headers.host ?? "localhost"}${target}`
    : target;
  Object.defineProperty(request, "url", { value: url });
  return request;
}

/** A request's body, read from the connection only as fast as the app reads it. */
class RequestBody {
  #dropped = false;

  constructor(private readonly req: IncomingMessage) {}

  stream(): ReadableStream<Uint8Array> {
    const req = this.req;
    return new ReadableStream({
      start: (controller) => {
        req.on("data", (chunk: Buffer) => {
          if (this.#dropped) return;
          controller.enqueue(new Uint8Array(chunk));
          if ((controller.desiredSize ?? 0) <= 0) req.pause();
        });
        req.once("end", () => this.#dropped || controller.close());
        req.once("error", (e) => controller.error(e));
        req.pause();
      },
      pull: () => void req.resume(),
      cancel: () => this.drop(),
    });
  }

  /** What is left of it is read and dropped. */
  drop() {
    this.#dropped = true;
    this.req.resume();
  }
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array) {
  while (bytes.length > 0) bytes = bytes.subarray(await conn.write(bytes));
}

function closeQuietly(closable: { close(): void }) {
  try {
    closable.close();
  } catch {
    // Closed already.
  }
}
