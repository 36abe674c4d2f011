/**
 * Serving the admin app: on a unix socket (requests, stale sockets, files that are not ours, the
 * socket removed at shutdown) and on TCP (the real port, an address in use).
 */
import { deepStrictEqual as assertEquals, ok as assert, rejects } from "node:assert/strict";
import { join } from "node:path";
import type { ListenAddress } from "../../lib/admin/listen.ts";
import { AdminListenError, serveAdmin, startAdminServer } from "../../lib/admin/server.ts";
import { createDirectHttpClient, UNIX_SOCKET_ORIGIN } from "../../lib/util/direct_http.ts";
import { DaemonFixture, withServedDaemon } from "./harness.ts";

async function withDaemon(fn: (f: DaemonFixture) => Promise<void>) {
  const f = await DaemonFixture.start();
  try {
    await fn(f);
  } finally {
    await f.close();
  }
}

function options<L extends ListenAddress>(f: DaemonFixture, listen: L) {
  return { daemon: f.daemon, listen, clock: f.clock, log: f.log.logger };
}

function socketPath(f: DaemonFixture): string {
  return join(f.node.root, "run/admin.sock");
}

/** The status of a GET, never through a proxy the environment may name. */
async function directFetch(url: string): Promise<{ status: number }> {
  const client = createDirectHttpClient({});
  try {
    const response = await fetch(url, { client });
    await response.body?.cancel();
    return { status: response.status };
  } finally {
    client.close();
  }
}

async function healthz(path: string): Promise<number> {
  const client = createDirectHttpClient({ proxy: { transport: "unix", path } });
  try {
    const response = await fetch(`${UNIX_SOCKET_ORIGIN}/healthz`, { client });
    await response.body?.cancel();
    return response.status;
  } finally {
    client.close();
  }
}

/** A socket left behind by a process killed with SIGKILL: nobody answers on it. */
async function staleSocket(path: string) {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      `Deno.listen({ transport: "unix", path: ${JSON.stringify(path)} }); console.log("ready");` +
      "setInterval(() => {}, 1000);",
    ],
    stdout: "piped",
  }).spawn();
  const reader = child.stdout.getReader();
  await reader.read();
  reader.releaseLock();
  child.kill("SIGKILL");
  await child.status;
  await child.stdout.cancel();
  assert((await Deno.lstat(path)).isSocket);
}

Deno.test("unix socket: real requests, and the socket is removed at shutdown", async () => {
  await withServedDaemon({
    via: "unix",
    prepare: (f) => f.writeToken("unix-token"),
  }, async (f) => {
    assertEquals(f.server.address, `unix:${socketPath(f)}`);
    // Bound under a temporary name, linked into place, and the temporary name gone.
    const names = [...Deno.readDirSync(join(f.node.root, "run"))].map((e) => e.name).sort();
    assertEquals(names, ["admin.sock", "containerd.sock", "lock"]);
    assertEquals((await f.request("/healthz")).status, 200);
    const reconcile = await f.request("/v1/reconcile", {
      method: "POST",
      headers: { authorization: "Bearer unix-token" },
    });
    assertEquals([reconcile.status, (await reconcile.json()).complete], [200, true]);
    const list = await (await f.request("/v1/checkpoints")).json();
    assertEquals(list.checkpoints.length, 3);
    assertEquals((await f.raw("GET /v1/checkpoints/%2e%2e/x HTTP/1.1")).status, 400);
    // No browser reaches a unix socket: the Host header is not checked there.
    assertEquals((await f.raw("GET /healthz HTTP/1.1\r\nHost: agent.example")).status, 200);
    assertEquals((await f.request("/nope")).status, 404);
    await f.server.close();
    await rejects(Deno.lstat(socketPath(f)), Deno.errors.NotFound);
  });
});

Deno.test("unix socket: a stale socket is removed first", async () => {
  await withDaemon(async (f) => {
    await staleSocket(socketPath(f));
    const server = await startAdminServer(options(f, { kind: "unix", path: socketPath(f) }));
    try {
      assertEquals(await healthz(socketPath(f)), 200);
      assertEquals(f.log.find("admin: removed a stale socket").length, 1);
    } finally {
      await server.close();
    }
  });
});

Deno.test("unix socket: a live socket, a regular file or a directory at the path is left alone", async () => {
  await withDaemon(async (f) => {
    const path = socketPath(f);
    const listener = Deno.listen({ transport: "unix", path });
    try {
      await rejects(
        startAdminServer(options(f, { kind: "unix", path })),
        new AdminListenError(`unix:${path}: another process is listening on it`),
      );
    } finally {
      listener.close();
    }

    await Deno.writeTextFile(path, "precious\n");
    await rejects(
      startAdminServer(options(f, { kind: "unix", path })),
      new AdminListenError(`unix:${path}: exists and is not a socket; it is left alone`),
    );
    assertEquals(await Deno.readTextFile(path), "precious\n");
    await Deno.remove(path);

    await Deno.mkdir(path);
    await rejects(
      startAdminServer(options(f, { kind: "unix", path })),
      new AdminListenError(`unix:${path}: exists and is not a socket; it is left alone`),
    );
    assert((await Deno.lstat(path)).isDirectory);
  });
});

Deno.test("unix socket: a file put in the socket's place while serving is not removed at shutdown", async () => {
  await withDaemon(async (f) => {
    const path = socketPath(f);
    const server = await startAdminServer(options(f, { kind: "unix", path }));
    await Deno.remove(path);
    await Deno.writeTextFile(path, "not ours\n");
    await server.close();
    assertEquals(await Deno.readTextFile(path), "not ours\n");
  });
});

Deno.test("tcp: port 0 reports the real port; an address in use leaves the agent without an endpoint", async () => {
  await withDaemon(async (f) => {
    const first = await startAdminServer(
      options(f, { kind: "tcp", hostname: "127.0.0.1", port: 0 }),
    );
    try {
      const port = Number(first.address.split(":")[1]);
      assert(port > 0);
      const response = await directFetch(`http://127.0.0.1:${port}/healthz`);
      assertEquals(response.status, 200);

      const second = await serveAdmin(options(f, { kind: "tcp", hostname: "127.0.0.1", port }));
      assertEquals(second, undefined);
      const logged = f.log.find("admin: endpoint not started; the agent runs without it");
      assertEquals(logged.length, 1);
      assert(String(logged[0].error).startsWith(`127.0.0.1:${port}: cannot listen:`));
    } finally {
      await first.close();
    }
  });
});

Deno.test("close: no connection is accepted any more, and a request under way is answered before it returns", async () => {
  await withDaemon(async (f) => {
    const token = "s3cr3t-admin-token-0123456789abcdef";
    await f.writeToken(token);
    const server = await startAdminServer(
      options(f, { kind: "tcp", hostname: "127.0.0.1", port: 0 }),
    );
    const port = Number(server.address.split(":")[1]);
    // A pass under way holds the one the request asks for.
    let release!: () => void;
    const held = f.daemon.between(() => new Promise<void>((resolve) => release = resolve));
    const asked = Promise.withResolvers<void>();
    const runPass = f.daemon.runPass.bind(f.daemon);
    f.daemon.runPass = (reason) => (asked.resolve(), runPass(reason));
    const client = createDirectHttpClient({});
    try {
      const reconcile = fetch(`http://127.0.0.1:${port}/v1/reconcile`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}` },
        client,
      });
      await asked.promise;
      let closed = false;
      const closing = server.close().then(() => closed = true);
      // Refused, or reset if it reached the listener's queue as the listener closed.
      await rejects(
        Deno.connect({ hostname: "127.0.0.1", port }),
        (e) =>
          e instanceof Deno.errors.ConnectionRefused || e instanceof Deno.errors.ConnectionReset,
      );
      assertEquals(closed, false);
      release();
      await held;
      const response = await reconcile;
      assertEquals([response.status, (await response.json()).complete], [200, true]);
      await closing;
    } finally {
      release();
      client.close();
    }
  });
});

Deno.test("tcp: the IPv6 loopback", async () => {
  await withDaemon(async (f) => {
    const server = await startAdminServer(options(f, { kind: "tcp", hostname: "::1", port: 0 }));
    try {
      assert(server.address.startsWith("[::1]:"), server.address);
      const response = await directFetch(`http://${server.address}/readyz`);
      assertEquals(response.status, 503);
    } finally {
      await server.close();
    }
  });
});

Deno.test("off: no endpoint, and the log says so", async () => {
  await withDaemon(async (f) => {
    assertEquals(await serveAdmin(options(f, { kind: "off" })), undefined);
    assertEquals(f.log.find("admin: endpoint off").length, 1);
  });
});
