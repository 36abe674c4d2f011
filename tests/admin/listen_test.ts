/** What an admin listen address means: its parts, whether it is local, where a client connects. */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import {
  connectAddress,
  formatListenAddress,
  isLoopbackHost,
  parseListenAddress,
} from "../../lib/admin/listen.ts";

Deno.test("listen addresses parse into their parts and format back", () => {
  const cases: [string, ReturnType<typeof parseListenAddress>][] = [
    ["off", { kind: "off" }],
    ["unix:/run/ckpt-agent/admin.sock", { kind: "unix", path: "/run/ckpt-agent/admin.sock" }],
    ["127.0.0.1:10280", { kind: "tcp", hostname: "127.0.0.1", port: 10280 }],
    ["localhost:0", { kind: "tcp", hostname: "localhost", port: 0 }],
    ["[::1]:10280", { kind: "tcp", hostname: "::1", port: 10280 }],
  ];
  for (const [text, address] of cases) {
    assertEquals(parseListenAddress(text), address);
    assertEquals(formatListenAddress(address), text);
  }
});

Deno.test("loopback hosts: 127.0.0.0/8, ::1 in any spelling, and localhost; nothing else", () => {
  for (
    const host of [
      "127.0.0.1",
      "127.1.2.3",
      "127.255.255.254",
      "::1",
      "0:0:0:0:0:0:0:1",
      "0000::0001",
      "::ffff:127.0.0.1",
      "localhost",
      "LOCALHOST",
    ]
  ) assertEquals([host, isLoopbackHost(host)], [host, true]);
  for (
    const host of [
      "0.0.0.0",
      "::",
      "0:0:0:0:0:0:0:0",
      "192.0.2.10",
      "10.0.0.1",
      "128.0.0.1",
      "::2",
      "fe80::1",
      "::ffff:192.0.2.1",
      "::ffff:0.0.0.0",
      "localhost.example.com",
      "node-1",
    ]
  ) assertEquals([host, isLoopbackHost(host)], [host, false]);
});

Deno.test("a client reaches a wildcard bind on loopback, anything else where it is", () => {
  assertEquals(connectAddress({ kind: "tcp", hostname: "0.0.0.0", port: 1 }), {
    kind: "tcp",
    hostname: "127.0.0.1",
    port: 1,
  });
  assertEquals(connectAddress({ kind: "tcp", hostname: "0::0", port: 1 }), {
    kind: "tcp",
    hostname: "::1",
    port: 1,
  });
  const elsewhere = { kind: "tcp", hostname: "192.0.2.10", port: 1 } as const;
  assertEquals(connectAddress(elsewhere), elsewhere);
  const unix = { kind: "unix", path: "/run/a.sock" } as const;
  assertEquals(connectAddress(unix), unix);
});
