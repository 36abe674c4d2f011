import { deepStrictEqual as assertEquals, ok as assert, rejects } from "node:assert/strict";
import {
  FetchClients,
  WatchClients,
  WATCHES_PER_CONNECTION,
} from "../../lib/sources/watch_clients.ts";

/** Real clients (no connection is made until one is used), each remembered with its state. */
function clientsMade() {
  const made: { client: Deno.HttpClient; closed: boolean }[] = [];
  const make = () => {
    const client = Deno.createHttpClient({});
    const entry = { client, closed: false };
    const close = client.close.bind(client);
    client.close = () => {
      entry.closed = true;
      close();
    };
    made.push(entry);
    return client;
  };
  const cleanup = () => made.forEach((m) => m.closed || m.client.close());
  return { made, make, cleanup };
}

Deno.test("over fetch, watches fill a client up to its share, then take another", () => {
  const { made, make, cleanup } = clientsMade();
  try {
    const clients = new FetchClients(make, 3);
    const slots = Array.from({ length: 7 }, () => clients.take());
    assertEquals(clients.size, 3);
    assertEquals(slots.map((s) => made.findIndex((m) => m.client === s.client)), [
      0,
      0,
      0,
      1,
      1,
      1,
      2,
    ]);
  } finally {
    cleanup();
  }
});

Deno.test("a connection left without watches closes, but the first; a slot frees once", () => {
  const { made, make, cleanup } = clientsMade();
  try {
    const clients = new FetchClients(make, 2);
    const [a, b, c, d] = Array.from({ length: 4 }, () => clients.take());
    c.free();
    c.free(); // once only: d keeps its place
    assert(!made[1].closed);
    d.free();
    assert(made[1].closed);
    a.free();
    b.free();
    assert(!made[0].closed, "the first connection stays for the next watch");
    assertEquals(clients.size, 1);
    // Room freed on a connection is taken again before a new one is made.
    clients.take();
    clients.take();
    assertEquals(made.length, 2);
  } finally {
    cleanup();
  }
});

Deno.test("renew drops every connection; watches asked again get new ones", () => {
  const { made, make, cleanup } = clientsMade();
  try {
    const clients = new FetchClients(make, 2);
    const old = [clients.take(), clients.take(), clients.take()];
    clients.renew();
    assert(made.every((m) => m.closed));
    assertEquals(clients.size, 0);
    for (const slot of old) slot.free(); // the owners free their old places: harmless
    const fresh = clients.take();
    assert(made.find((m) => m.client === fresh.client && !m.closed));
    assertEquals(clients.size, 1);
  } finally {
    cleanup();
  }
});

Deno.test("closed while a connection is being made: the watches waiting fail, and no new connection is made", async () => {
  const { make, cleanup } = clientsMade();
  try {
    let connects = 0;
    const answers: ((conn: Deno.Conn | undefined) => void)[] = [];
    const clients = new WatchClients({
      connect: () => {
        connects++;
        return new Promise((resolve) => answers.push(resolve));
      },
      makeFetch: make,
      timeoutMs: 60_000,
    });
    const waiting = clients.place();
    assertEquals(connects, 1);
    clients.close();
    await rejects(waiting, /watch connections closed/);
    await rejects(clients.place(), /watch connections closed/);
    // The connection asked for before the close comes in late: it is let go.
    answers[0](undefined);
    await new Promise((resolve) => setTimeout(resolve, 0));
    assertEquals(connects, 1);
    assertEquals(clients.size, 0);
  } finally {
    cleanup();
  }
});

Deno.test("a connection's share is under any HTTP/2 server's cap on streams", () => {
  // Go's servers default to 250 streams a connection; RFC 9113 asks servers for at least 100.
  assert(WATCHES_PER_CONNECTION <= 100);
});
