/**
 * The agent as a process limited to 200 descriptors (`prlimit --nofile=200`), its admin endpoint
 * flooded with 400 connections that send nothing: it stays up, activates the checkpoints when the
 * control plane goes, and answers again once the connections are gone. Over TCP and the unix
 * socket.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { SimNode } from "../../lib/sim/node.ts";
import { createDirectHttpClient, UNIX_SOCKET_ORIGIN } from "../../lib/util/direct_http.ts";
import { untilAnswers } from "../helpers/admin_socket.ts";
import { ChildLines } from "../helpers/child_lines.ts";
import { untilStatusRecords } from "../helpers/sim_node.ts";
import { until } from "../helpers/until.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

/** The checkpoint manifests in the static-pod dir (etcd's own manifest is YAML). */
function activated(node: SimNode): string[] {
  return [...Deno.readDirSync(node.config().staticPodDir)]
    .map((entry) => entry.name)
    .filter((name) => name.endsWith(".json"));
}

for (const via of ["tcp", "unix"] as const) {
  Deno.test(`${via}: 400 connections to an agent limited to 200 descriptors leave it up, activating, and answering once they are gone`, async () => {
    const node = await SimNode.start();
    try {
      const socket = join(node.root, "run/admin.sock");
      const config = await node.writeConfigFile({
        adminListen: via === "unix" ? `unix:${socket}` : "127.0.0.1:0",
      });
      const child = new Deno.Command("prlimit", {
        args: ["--nofile=200", Deno.execPath(), "run", "--allow-all", "--quiet", MAIN, "run"]
          .concat(["--config", config]),
        stdout: "null",
        stderr: "piped",
      }).spawn();
      const log = new ChildLines(child.stderr);
      let exited = false;
      const status = child.status.finally(() => exited = true);
      try {
        await until(
          "the endpoint listens",
          () => exited || log.find("admin: listening").length > 0,
        );
        const address = String(log.find("admin: listening")[0]?.address);
        const port = Number(address.slice(address.lastIndexOf(":") + 1));
        const connect = () =>
          via === "unix"
            ? Deno.connect({ transport: "unix", path: socket })
            : Deno.connect({ hostname: "127.0.0.1", port });
        assertEquals(await untilStatusRecords(node, 3), 3, "the first pass made the checkpoints");

        const flood = await Promise.allSettled(Array.from({ length: 400 }, connect));
        const conns = flood.flatMap((c) => c.status === "fulfilled" ? [c.value] : []);
        try {
          assertEquals(conns.length, 400, flood.find((c) => c.status === "rejected")?.reason);
          await node.loseControlPlane();
          await until("the checkpoints activated", () => exited || activated(node).length === 3);
          assert(!exited, `the agent exited:\n${log.lines.join("\n")}`);
        } finally {
          for (const conn of conns) conn.close();
        }

        const client = createDirectHttpClient(
          via === "unix" ? { proxy: { transport: "unix", path: socket } } : {},
        );
        try {
          const origin = via === "unix" ? UNIX_SOCKET_ORIGIN : `http://${address}`;
          await (await untilAnswers(client, "/healthz", origin)).body?.cancel();
        } finally {
          client.close();
        }
      } finally {
        if (!exited) child.kill("SIGTERM");
        await log.ended;
      }
      const stderr = log.lines.join("\n");
      assertEquals((await status).code, 0, stderr);
      assert(!/Too many open files/.test(stderr), stderr);
      assertEquals(
        log.find("admin: connection limit reached; connections beyond it are closed").length > 0,
        true,
        stderr,
      );
    } finally {
      await node.close();
    }
  });
}
