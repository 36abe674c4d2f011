/**
 * The admin endpoint as `ckpt-agent run` starts it: a real daemon on a simulated node serving its
 * socket until SIGTERM. (A non-loopback address is refused with the configuration:
 * tests/commands/config_refusals_test.ts.)
 */
import { deepStrictEqual as assertEquals, ok as assert, rejects } from "node:assert/strict";
import { join } from "node:path";
import { createDirectHttpClient, UNIX_SOCKET_ORIGIN } from "../../lib/util/direct_http.ts";
import { SimNode } from "../../lib/sim/node.ts";
import { untilAnswers } from "../helpers/admin_socket.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

Deno.test("ckpt-agent run serves its admin socket, and removes it after the last pass on SIGTERM", async () => {
  const node = await SimNode.start();
  try {
    const socket = join(node.root, "run/admin.sock");
    const config = await node.writeConfigFile({ adminListen: `unix:${socket}` });
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "--allow-all", "--quiet", MAIN, "run", "--config", config, "--log-level=debug"],
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const client = createDirectHttpClient({ proxy: { transport: "unix", path: socket } });
    try {
      await (await untilAnswers(client, "/readyz")).body?.cancel();
      const list = await (await fetch(`${UNIX_SOCKET_ORIGIN}/v1/checkpoints`, { client })).json();
      assertEquals(list.checkpoints.length, 3);
    } finally {
      client.close();
      child.kill("SIGTERM");
    }
    const out = await child.output();
    const stderr = new TextDecoder().decode(out.stderr);
    assertEquals(out.code, 0, stderr);
    await rejects(Deno.lstat(socket), Deno.errors.NotFound);
    const messages = stderr.trim().split("\n").map((line) => JSON.parse(line).msg);
    const order = [
      "admin: listening",
      "stopping after the current pass",
      "admin: stopped",
      "stopped",
    ]
      .map((msg) => messages.indexOf(msg));
    assert(order.every((i, n) => i >= 0 && (n === 0 || i > order[n - 1])), messages.join("\n"));
    // Requests, probes and scrapes included, are said at debug only.
    const requests = stderr.trim().split("\n").map((line) => JSON.parse(line))
      .filter((l) => l.msg === "admin request");
    assert(requests.some((l) => l.path === "/v1/checkpoints"));
    assertEquals(new Set(requests.map((l) => l.level)), new Set(["debug"]));
  } finally {
    await node.close();
  }
});
