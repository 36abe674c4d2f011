/**
 * `ckpt-agent run` as systemd runs it, a subprocess with the compiled binary's flags against a
 * simulated node, with NOTIFY_SOCKET naming a real datagram socket the test reads (a path, or an
 * abstract name): READY=1 after the first pass, STATUS= when it changes, WATCHDOG=1 over and over,
 * STOPPING=1 on SIGTERM and nothing after it. Without NOTIFY_SOCKET the log says nothing of
 * systemd.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { SimNode } from "../../lib/sim/node.ts";
import { agentDenoFlags } from "../../scripts/permissions.ts";
import { abstractName, NotifyInbox } from "../helpers/notify_inbox.ts";
import { untilStatusRecords } from "../helpers/sim_node.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

/** The test's environment without what systemd may have given the test runner itself. */
function environment(systemd: Record<string, string>): Record<string, string> {
  const env = Deno.env.toObject();
  for (const key of ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"]) delete env[key];
  return { ...env, NO_COLOR: "1", ...systemd };
}

function startAgent(configFile: string, systemd: Record<string, string>) {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", ...agentDenoFlags(), "--quiet", MAIN, "run", "--config", configFile],
    clearEnv: true,
    env: environment(systemd),
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
}

const count = (messages: string[], message: string) => messages.filter((m) => m === message).length;

async function notifiedRun(notifySocket: (node: SimNode) => string) {
  const node = await SimNode.start();
  try {
    const inbox = new NotifyInbox(notifySocket(node));
    try {
      const child = startAgent(await node.writeConfigFile(), {
        NOTIFY_SOCKET: inbox.address,
        // A ping every 100 ms.
        WATCHDOG_USEC: "300000",
      });
      const stderr = new Response(child.stderr).text();
      try {
        await inbox.until(
          "READY=1, STATUS= and three WATCHDOG=1",
          (messages) =>
            count(messages, "READY=1") === 1 &&
            messages.some((m) => m.startsWith("STATUS=")) &&
            count(messages, "WATCHDOG=1") >= 3,
        );
      } finally {
        child.kill("SIGTERM");
      }
      const status = await child.status;
      const log = await stderr;
      assertEquals(status.code, 0, log);
      const messages = await inbox.since();

      const ready = messages.indexOf("READY=1");
      const statuses = messages.flatMap((m, i) => m.startsWith("STATUS=") ? [i] : []);
      assertEquals(
        messages.slice(0, ready).filter((m) => !m.startsWith("EXTEND_TIMEOUT_USEC=")),
        [],
      );
      assert(statuses[0] > ready, JSON.stringify(messages));
      // Nothing changed after the first pass: its line is the only one.
      assertEquals(statuses.map((i) => messages[i]), ["STATUS=3 inactive"]);
      // Pings come from a timer: more of them than passes.
      assert(messages.indexOf("WATCHDOG=1") > ready, JSON.stringify(messages));
      // STOPPING=1 last: the pass under way ends, and systemd is told nothing more.
      assertEquals(messages.indexOf("STOPPING=1"), messages.length - 1, JSON.stringify(messages));
      assertEquals(
        new Set(messages.map((m) => m.split("=")[0])),
        new Set([
          "READY",
          "STATUS",
          "WATCHDOG",
          "STOPPING",
          ...(ready > 0 ? ["EXTEND_TIMEOUT_USEC"] : []),
        ]),
      );

      const lines = log.trim().split("\n").map((line) => JSON.parse(line));
      const said = lines.filter((l) => l.msg.startsWith("systemd:"));
      assertEquals(said.map((l) => [l.level, l.msg]), [["info", "systemd: notifying"]], log);
      assertEquals([said[0].socket, said[0].watchdogMs, said[0].pingEveryMs], [
        inbox.address,
        300,
        100,
      ]);
    } finally {
      await inbox.close();
    }
  } finally {
    await node.close();
  }
}

Deno.test("ckpt-agent run under systemd: READY, STATUS, WATCHDOG, then STOPPING on SIGTERM", async () => {
  await notifiedRun((node) => join(node.root, "run/notify.sock"));
});

Deno.test("ckpt-agent run under systemd, NOTIFY_SOCKET an abstract name", async () => {
  await notifiedRun(() => abstractName());
});

Deno.test("ckpt-agent run without NOTIFY_SOCKET says nothing of systemd", async () => {
  const node = await SimNode.start();
  try {
    const child = startAgent(await node.writeConfigFile(), {});
    const stderr = new Response(child.stderr).text();
    const records = await untilStatusRecords(node, 3);
    child.kill("SIGTERM");
    const status = await child.status;
    const log = await stderr;
    assertEquals([records, status.code], [3, 0], log);
    assert(!log.includes("systemd"), log);
  } finally {
    await node.close();
  }
});
