/**
 * A simulated peer keeps its port across stopListening and resumeListening, as a restarted
 * server does; its port is below the kernel's ephemeral range, so that no outgoing connection
 * (each connection a peer accepts makes one, to its inner server) is given it while the peer is
 * stopped, and no two peers of the process hold the same one.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { type SimPeer, startSimPeer } from "../../lib/sim/peer.ts";

const PEERS = 20;

function ephemeralLow(): number {
  return Number(Deno.readTextFileSync("/proc/sys/net/ipv4/ip_local_port_range").split(/\s+/)[0]);
}

function answer() {
  return { status: 200, body: { kind: "Status" } };
}

Deno.test("sim peers: ports below the ephemeral range, none held twice, each got back after a stop", async () => {
  const peers: SimPeer[] = [];
  try {
    for (let i = 0; i < PEERS; i++) {
      peers.push(await startSimPeer({ handle: answer, failure: answer }));
    }
    const ports = peers.map((p) => p.port);
    assertEquals(new Set(ports).size, PEERS);
    for (const port of ports) assert(port < ephemeralLow(), `${port} is an ephemeral port`);
    for (const peer of peers) await peer.stopListening();
    for (const peer of peers) await peer.resumeListening();
    for (const peer of peers) {
      const got = await fetch(`${peer.url}/version`);
      assertEquals([got.status, peer.url.endsWith(`:${peer.port}`)], [200, true]);
      await got.body?.cancel();
    }
  } finally {
    for (const peer of peers) await peer.close();
  }
});
