/**
 * The HTTP/2 connections watches share. A server caps the streams one connection may have open
 * at once (Go's default is 250; the API server's generic serving options ask 1,000), and a
 * watch lasts: past the cap, a further watch waits for a stream that never frees, times out,
 * and is asked again, over and over. So watches are spread over connections of at most
 * min(the server's MAX_CONCURRENT_STREAMS, WATCHES_PER_CONNECTION) streams each, and a
 * connection whose watches have all ended is closed, but the first.
 *
 * The connections are our own (lib/sources/h2/connection.ts): a watch costs a stream's few
 * fields rather than fetch's native buffers, and a connection gone silent is found by PINGs.
 * A server that does not pick HTTP/2 in the TLS handshake gets the watches over fetch instead,
 * spread the same way over fetch's clients (one pool of connections each).
 */
import { realTimers, type Timers } from "../util/timers.ts";
import { H2Connection, type H2Stream, type StreamHandlers } from "./h2/connection.ts";
import type { HeaderField } from "./h2/hpack.ts";

/** Well under any HTTP/2 server's cap on streams a connection (100 is the least RFC 9113 asks). */
export const WATCHES_PER_CONNECTION = 100;

/** One watch's place on a fetch client: `free` is idempotent. */
export interface WatchSlot {
  readonly client: Deno.HttpClient;
  free(): void;
}

/** Where a watch goes: a stream of one of our connections, or a fetch client's slot. */
export type Placement =
  | {
    kind: "h2";
    open(fields: readonly HeaderField[], on: StreamHandlers): H2Stream;
    /** Gives the place back unused. */
    cancel(): void;
  }
  | { kind: "fetch"; slot: WatchSlot };

/** A TLS connection to the server, or undefined when the server did not pick HTTP/2. */
export type ConnectH2 = () => Promise<Deno.Conn | undefined>;

/** The clients of fetch, each its own connection(s), with up to `perConnection` watches. */
export class FetchClients {
  readonly #make: () => Deno.HttpClient;
  readonly #perConnection: number;
  #connections: { client: Deno.HttpClient; watches: number }[] = [];

  constructor(make: () => Deno.HttpClient, perConnection = WATCHES_PER_CONNECTION) {
    this.#make = make;
    this.#perConnection = perConnection;
  }

  /** A place for one more watch: on the first client with room, else on a new one. */
  take(): WatchSlot {
    let connection = this.#connections.find((c) => c.watches < this.#perConnection);
    if (connection === undefined) {
      connection = { client: this.#make(), watches: 0 };
      this.#connections.push(connection);
    }
    connection.watches++;
    const taken = connection;
    let freed = false;
    return {
      client: taken.client,
      free: () => {
        if (freed) return;
        freed = true;
        taken.watches--;
        const index = this.#connections.indexOf(taken);
        if (taken.watches === 0 && index > 0) {
          this.#connections.splice(index, 1);
          taken.client.close();
        }
      },
    };
  }

  get size(): number {
    return this.#connections.length;
  }

  renew(): void {
    const old = this.#connections;
    this.#connections = [];
    for (const connection of old) connection.client.close();
  }
}

interface Pending {
  resolve(placement: Placement): void;
  reject(error: unknown): void;
}

/** One of our connections: connecting (its watches wait for its SETTINGS), then open. */
interface Connection {
  h2?: H2Connection;
  /** Watches placed on it whose streams are not opened yet. */
  reserved: number;
  /** Watches waiting for it to connect. */
  waiting: Pending[];
}

export interface WatchClientsOptions {
  /** Connects to the server for our HTTP/2; unset: fetch only. */
  connect?: ConnectH2;
  /** A fetch client, when the server does not speak HTTP/2 (or `connect` is unset). */
  makeFetch: () => Deno.HttpClient;
  /** How long a connection may take to be ready (TCP, TLS, the server's SETTINGS). */
  timeoutMs: number;
  perConnection?: number;
  timers?: Timers;
}

export class WatchClients {
  readonly #connect?: ConnectH2;
  readonly #perConnection: number;
  readonly #timeoutMs: number;
  readonly #timers: Timers;
  readonly #fetch: FetchClients;
  /** Set once a server did not pick HTTP/2: every watch goes over fetch from then on. */
  #overFetch: boolean;
  #connections: Connection[] = [];
  #closed = false;

  constructor(options: WatchClientsOptions) {
    this.#connect = options.connect;
    this.#perConnection = options.perConnection ?? WATCHES_PER_CONNECTION;
    this.#timeoutMs = options.timeoutMs;
    this.#timers = options.timers ?? realTimers;
    this.#fetch = new FetchClients(options.makeFetch, this.#perConnection);
    this.#overFetch = options.connect === undefined;
  }

  /** A place for one more watch: a stream of a connection with room, on a new connection if
   *  none has; rejected when a new connection cannot be made. */
  place(): Promise<Placement> {
    return new Promise((resolve, reject) => this.#place({ resolve, reject }));
  }

  #place(pending: Pending) {
    if (this.#closed) return pending.reject(new Error("watch connections closed"));
    if (this.#overFetch) return pending.resolve({ kind: "fetch", slot: this.#fetch.take() });
    const open = this.#connections.find((c) => c.h2 && this.#room(c) > 0);
    if (open) return pending.resolve(this.#reserve(open));
    const connecting = this.#connections.find((c) =>
      !c.h2 && c.waiting.length < this.#perConnection
    );
    if (connecting) return connecting.waiting.push(pending);
    const connection: Connection = { reserved: 0, waiting: [pending] };
    this.#connections.push(connection);
    void this.#open(connection);
  }

  /** Streams a connection may take now. */
  #room(connection: Connection): number {
    const h2 = connection.h2;
    if (!h2 || h2.closing) return 0;
    const cap = Math.min(this.#perConnection, h2.maxStreams);
    return cap - h2.streams - connection.reserved;
  }

  #reserve(connection: Connection): Placement {
    connection.reserved++;
    let used = false;
    const use = () => {
      if (used) return false;
      used = true;
      connection.reserved--;
      return true;
    };
    return {
      kind: "h2",
      open: (fields, on) => {
        use();
        return connection.h2!.request(fields, on);
      },
      cancel: () => {
        if (use()) this.#changed(connection);
      },
    };
  }

  async #open(connection: Connection) {
    let stopTimer = () => {};
    try {
      const conn = await new Promise<Deno.Conn | undefined>((resolve, reject) => {
        let late = false;
        stopTimer = this.#timers.after(this.#timeoutMs, () => {
          late = true;
          reject(new Error(`no connection within ${this.#timeoutMs} ms`));
        });
        this.#connect!().then((conn) => late ? conn?.close() : resolve(conn), reject);
      });
      if (!this.#connections.includes(connection)) {
        conn?.close();
        throw new Error("connection closed");
      }
      if (conn === undefined) {
        // The server did not pick HTTP/2: fetch for this and every later watch.
        stopTimer();
        this.#overFetch = true;
        this.#drop(connection);
        for (const pending of connection.waiting) this.#place(pending);
        return;
      }
      await new Promise<void>((resolve, reject) => {
        const h2 = new H2Connection(conn, {
          ready: resolve,
          changed: () => {
            if (h2.closing && h2.streams === 0) reject(new Error("connection closed at once"));
            this.#changed(connection);
          },
        }, this.#timers);
        connection.h2 = h2;
        stopTimer = this.#timers.after(this.#timeoutMs, () => {
          h2.close(`no HTTP/2 settings within ${this.#timeoutMs} ms`);
          reject(new Error(`no HTTP/2 settings within ${this.#timeoutMs} ms`));
        });
      });
      stopTimer();
      const waiting = connection.waiting;
      connection.waiting = [];
      if (this.#room(connection) <= 0) {
        // No room on a connection just made (going away at once, or a cap of 0 streams): the
        // watches fail, to be asked again by their owners, rather than make connection after
        // connection.
        const error = new Error(
          connection.h2!.closing
            ? "connection going away as it opened"
            : "the server allows no streams (SETTINGS_MAX_CONCURRENT_STREAMS 0)",
        );
        for (const pending of waiting) pending.reject(error);
        this.#changed(connection);
        return;
      }
      for (const pending of waiting) {
        if (this.#room(connection) > 0) pending.resolve(this.#reserve(connection));
        else this.#place(pending);
      }
    } catch (e) {
      stopTimer();
      this.#drop(connection);
      connection.h2?.close();
      for (const pending of connection.waiting) pending.reject(e);
      connection.waiting = [];
    }
  }

  /** A connection's streams or state changed: closed ones are forgotten, and an extra one
   *  left without watches is closed. */
  #changed(connection: Connection) {
    const h2 = connection.h2;
    if (!h2 || !h2.ready) return;
    const index = this.#connections.indexOf(connection);
    if (index < 0) return;
    if (h2.closing) {
      if (h2.streams === 0) this.#drop(connection);
      return;
    }
    const idle = h2.streams === 0 && connection.reserved === 0 && connection.waiting.length === 0;
    if (idle && index > 0) {
      this.#drop(connection);
      h2.close("no watches left");
    }
  }

  #drop(connection: Connection) {
    const index = this.#connections.indexOf(connection);
    if (index >= 0) this.#connections.splice(index, 1);
  }

  /** Connections open or being made now. */
  get size(): number {
    return this.#connections.length + this.#fetch.size;
  }

  /**
   * Every connection is dropped for new ones (the old may be dead without having said so);
   * the watches on them are to be asked again by their owners.
   */
  renew(): void {
    const old = this.#connections;
    this.#connections = [];
    for (const connection of old) {
      connection.h2?.close("connection renewed");
      // Watches still waiting for it are placed afresh (once closed, they fail).
      for (const pending of connection.waiting) this.#place(pending);
      connection.waiting = [];
    }
    this.#fetch.renew();
  }

  /** Every connection is closed, and watches still waiting for one (or asking later) fail. */
  close(): void {
    this.#closed = true;
    this.renew();
  }
}
