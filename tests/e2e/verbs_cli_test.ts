/**
 * `ckpt-agent pin|unpin|rollback|purge` as an operator runs them, on a simulated node: with no
 * agent running they act on disk under the lock (and are refused while someone holds it); with
 * an agent running they go through its admin endpoint with the token.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { versionsDir } from "../../lib/core/checkpoint_layout.ts";
import { asArray, type Json } from "../../lib/core/json.ts";
import { pathExists } from "../../lib/disk/dirs.ts";
import { acquireLock, isLock } from "../../lib/disk/lock.ts";
import { SimNode } from "../../lib/sim/node.ts";
import { createDirectHttpClient } from "../../lib/util/direct_http.ts";
import { untilAnswers } from "../helpers/admin_socket.ts";
import { withAgentOnNode } from "../helpers/agent_on_node.ts";
import { runCli } from "../helpers/cli.ts";

const ID = "kube-system/kube-controller-manager-m4t9z";
const FILE = "kube-system-kube-controller-manager-m4t9z.json";
const SCHEDULER = "kube-system/kube-scheduler-q8w2c";
const TOKEN = "s3cr3t-admin-token-0123456789abcdef";
const MAIN = new URL("../../main.ts", import.meta.url).pathname;

function pushFlag(flag: string) {
  return (pod: { spec?: Json }) => {
    (asArray((pod.spec as Json).containers)[0].command as string[]).push(flag);
    return pod as never;
  };
}

Deno.test("verbs on disk with no agent running: idempotent, shown by status, refused while the lock is held", async () => {
  await withAgentOnNode({}, { promoteAfterMs: 0 }, async (n) => {
    // Three versions of the controller manager: promoteAfter 0 promotes each spec at once.
    assertEquals((await n.pass()).errors, []);
    for (const flag of ["--v=2", "--v=3"]) {
      await n.node.updateParent(ID, pushFlag(flag));
      assertEquals((await n.pass()).errors, []);
    }
    const c = n.config();
    const config = await n.node.writeConfigFile({ promoteAfterMs: 0 });
    const cli = (...args: string[]) => runCli([...args, "--config", config]);

    const pin = await cli("pin", ID);
    assertEquals(pin.code, 0, pin.stderr);
    assert(pin.stdout.includes(`source: the disk, under ${c.lockFile}`), pin.stdout);
    assert(pin.stdout.includes(`${ID}: pinned`), pin.stdout);
    // The id may also come after the flags.
    const after = await runCli(["pin", "--config", config, ID]);
    assert(after.stdout.includes("already pinned since"), after.stderr);
    assert(pin.stderr.includes('"msg":"checkpoint pin"'), "the verb is logged");

    const rollback = await cli("rollback", ID, "--output", "json");
    assertEquals(rollback.code, 0, rollback.stderr);
    assertEquals(JSON.parse(rollback.stdout).versions.kept, 2);
    assertEquals(
      await Deno.readTextFile(join(c.inactiveDir, FILE)),
      await Deno.readTextFile(join(versionsDir(c, ID), "2.json")),
    );
    const status = await cli("status", "--output", "json");
    const row = JSON.parse(status.stdout).checkpoints.find((r: { id: string }) => r.id === ID);
    assertEquals([row.versions.kept, row.versions.versions, !!row.versions.pinned], [
      2,
      [1, 2, 3],
      true,
    ]);
    const text = await cli("status");
    assert(text.stdout.split("\n").some((l) => l.startsWith(ID) && l.includes("2 pinned")));

    for (
      const [args, code, said] of [
        [["rollback", ID, "--to", "9"], 1, "has no version 9"],
        [["rollback", ID, "--to", "two"], 2, "--to: must be a version number"],
        [["pin", "kube_system/x"], 2, "bad checkpoint id"],
        [["pin", "kube-system/nobody"], 1, "no checkpoint kube-system/nobody"],
        [["pin"], 2, "the checkpoint is required"],
        [["pin", ID, SCHEDULER], 2, "one checkpoint at a time, not 2"],
      ] as const
    ) {
      const r = await cli(...args);
      assertEquals([args, r.code], [args, code], r.stderr);
      assert(r.stderr.includes(said), r.stderr);
    }

    const lock = await acquireLock(c.lockFile);
    assert(isLock(lock));
    try {
      const held = await cli("unpin", ID);
      assertEquals(held.code, 3, held.stderr);
      assert(held.stderr.includes(`an agent holds ${c.lockFile}`), held.stderr);
    } finally {
      await lock.release();
    }
    assert((await cli("unpin", ID)).stdout.includes(`${ID}: unpinned`));
    assert((await cli("unpin", ID)).stdout.includes(`${ID}: was not pinned`));

    // Active: purge is refused unless forced, which withdraws the copy.
    await n.node.loseControlPlane();
    assertEquals((await n.pass()).errors, []);
    const active = join(c.staticPodDir, "kube-system-kube-scheduler-q8w2c.json");
    assert(await pathExists(active));
    const refused = await cli("purge", SCHEDULER);
    assertEquals(refused.code, 1);
    assert(refused.stderr.includes("purge --force"), refused.stderr);
    const forced = await cli("purge", SCHEDULER, "--force");
    assertEquals(forced.code, 0, forced.stderr);
    assertEquals(await pathExists(active), false);
    const listed = JSON.parse((await cli("status", "--output", "json")).stdout).checkpoints;
    assert(!listed.some((r: { id: string }) => r.id === SCHEDULER), "its status record is gone");
  });
});

Deno.test("verbs through a running agent: its endpoint with the token; the lock refuses the disk", async () => {
  const node = await SimNode.start();
  try {
    const socket = join(node.root, "run/admin.sock");
    const c = node.config();
    await Deno.writeTextFile(c.adminTokenFile, TOKEN, { mode: 0o600 });
    // The same node with the endpoint off, as a command would see an agent it cannot reach.
    const off = join(node.root, "etc/ckpt-agent/endpoint-off.yaml");
    await Deno.rename(await node.writeConfigFile({ adminListen: "off" }), off);
    const config = await node.writeConfigFile({ adminListen: `unix:${socket}` });
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "--allow-all", "--quiet", MAIN, "run", "--config", config],
      stdout: "null",
      stderr: "piped",
    }).spawn();
    const client = createDirectHttpClient({ proxy: { transport: "unix", path: socket } });
    try {
      await (await untilAnswers(client, "/readyz")).body?.cancel();
      const cli = (...args: string[]) => runCli([...args, "--config", config]);
      const pin = await cli("pin", ID);
      assertEquals(pin.code, 0, pin.stderr);
      assert(pin.stdout.includes(`source: the running agent at unix:${socket}`), pin.stdout);
      const view = await (await fetch(`http://localhost/v1/checkpoints/${ID}`, { client }))
        .json();
      assert(view.versions.pinned, JSON.stringify(view.versions));
      assert((await cli("unpin", ID)).stdout.includes(`${ID}: unpinned`));
      const none = await cli("rollback", ID);
      assertEquals(none.code, 1);
      assert(none.stderr.includes("has no older version (versions: 1)"), none.stderr);

      // An agent whose endpoint the command cannot reach: the lock keeps it off the disk.
      const locked = await runCli(["pin", ID, "--config", off]);
      assertEquals(locked.code, 3, locked.stderr);
      assert(locked.stderr.includes("the admin endpoint is off, but an agent holds"));

      // No token: the agent refuses, and nothing falls back to the disk.
      await Deno.remove(c.adminTokenFile);
      const refused = await cli("pin", ID);
      assertEquals(refused.code, 1, refused.stderr);
      assert(refused.stderr.includes("refused: mutating requests are disabled"), refused.stderr);
      assertEquals(await pathExists(join(versionsDir(c, ID), "pinned.json")), false);
    } finally {
      client.close();
      child.kill("SIGTERM");
      await child.output();
    }
  } finally {
    await node.close();
  }
});
