/**
 * The read-only commands and the guard rails of `run`, end to end against a simulated node:
 * `--once --dry-run` and `snapshot` write nothing, `snapshot | plan` gives the dry run's plan, a
 * second instance is refused with exit 3, bad configuration exits 2.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { runCli } from "../helpers/cli.ts";
import { tree } from "../helpers/tree.ts";
import { acquireLock, isLock } from "../../lib/disk/lock.ts";
import { withNode } from "../helpers/sim_node.ts";

Deno.test("--once --dry-run and snapshot write nothing at all", async () => {
  await withNode(async (node, config) => {
    const before = await tree(node.root, { stamps: true });
    const dry = await runCli(["--once", "--dry-run", "--config", config, "--output", "json"]);
    assertEquals(dry.code, 0, dry.stderr);
    assertEquals(JSON.parse(dry.stdout).stops.length, 3);
    const snap = await runCli(["snapshot", "--config", config]);
    assertEquals(snap.code, 0, snap.stderr);
    assertEquals(await tree(node.root, { stamps: true }), before);
  });
});

Deno.test("snapshot | plan --snapshot - gives the dry run's plan", async () => {
  await withNode(async (node, config) => {
    // Some history first, so that the state carries a grace deadline.
    assertEquals((await runCli(["--once", "--config", config])).code, 0);
    await node.deleteParent("kube-system/kube-scheduler-q8w2c");
    assertEquals((await runCli(["--once", "--config", config])).code, 0);
    await node.loseControlPlane();

    const snap = await runCli(["snapshot", "--config", config]);
    const snapshot = JSON.parse(snap.stdout);
    assertEquals(snapshot.apiAvailable, false);
    assertEquals(snapshot.kubeletAvailable, false);
    assertEquals(snapshot.state["kube-system/kube-scheduler-q8w2c"].state, "inactive-grace");
    const planned = await runCli(["plan", "--snapshot", "-"], { stdin: snap.stdout });
    assertEquals(planned.code, 0, planned.stderr);
    const dry = await runCli(["--once", "--dry-run", "--config", config, "--output", "json"]);
    // Same observations, same stored state: the same plan (no deadline is started here, so the
    // two runs' clocks cannot differ in the output).
    assertEquals(JSON.parse(planned.stdout), JSON.parse(dry.stdout));
    // During the outage even the deleted parent's copy is started: nobody can confirm it.
    assertEquals(JSON.parse(dry.stdout).starts, [
      "kube-system/kube-apiserver-7x2kq",
      "kube-system/kube-controller-manager-m4t9z",
      "kube-system/kube-scheduler-q8w2c",
    ]);
  });
});

Deno.test("a second instance is refused with exit 3 and the holder's pid", async () => {
  await withNode(async (node, config) => {
    const lock = await acquireLock(node.config().lockFile);
    assert(isLock(lock));
    try {
      const r = await runCli(["--once", "--config", config]);
      assertEquals(r.code, 3);
      assert(r.stderr.includes(`pid ${Deno.pid}`), r.stderr);
      assertEquals(r.stdout, "");
    } finally {
      await lock.release();
    }
  });
});

Deno.test("bad configuration exits 2 with one line naming the key", async () => {
  const cases: [string[], string][] = [
    [["--once", "--config", "/nonexistent/config.yaml"], "config"],
    [["--once", "--poll-interval", "soon"], "poll-interval"],
    [["--once", "--output", "yaml"], "--output"],
    [["run", "--dry-run"], "--dry-run"],
  ];
  for (const [args, key] of cases) {
    const r = await runCli(args);
    assertEquals(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    const lines = r.stderr.trimEnd().split("\n");
    assertEquals(lines.length, 1, r.stderr);
    assert(lines[0].includes(key), r.stderr);
  }
});
