/**
 * The HTTP/2 connections watches share. A server caps the streams one connection may have open
 * at once (Go's default is 250; the API server's generic serving options ask 1,000), and a
 * watch lasts: past the cap, a further watch waits for a stream that never frees, times out,
 * and is asked again, over and over. So watches are spread over connections of at most
 * WATCHES_PER_CONNECTION streams each (one Deno.HttpClient, with its own pool, per connection),
 * and a connection whose watches have all ended is closed, but the first.
 */

/** Well under any HTTP/2 server's cap on streams a connection (100 is the least RFC 9113 asks). */
export const WATCHES_PER_CONNECTION = 100;

interface Connection {
  client: Deno.HttpClient;
  watches: number;
}

/** One watch's place on a connection: `free` is idempotent. */
export interface WatchSlot {
  readonly client: Deno.HttpClient;
  free(): void;
}

export class WatchClients {
  readonly #make: () => Deno.HttpClient;
  readonly #perConnection: number;
  #connections: Connection[] = [];

  constructor(make: () => Deno.HttpClient, perConnection = WATCHES_PER_CONNECTION) {
    this.#make = make;
    this.#perConnection = perConnection;
  }

  /** A place for one more watch: on the first connection with room, else on a new one. */
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

  /** Connections open now. */
  get size(): number {
    return this.#connections.length;
  }

  /**
   * Every connection is dropped for new ones (the old may be dead without having said so);
   * the watches on them are to be asked again by their owners, who free their old slots.
   */
  renew(): void {
    const old = this.#connections;
    this.#connections = [];
    for (const connection of old) connection.client.close();
  }

  close(): void {
    this.renew();
  }
}
