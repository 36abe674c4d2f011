/**
 * Idle means idle: once a pass has written everything, passes with nothing to do change no
 * metadata at all — no chmod, chown, rewrite or rename of anything under any configured
 * directory (ctime would move) — for `--once` (a new process each time, which opens the stores
 * again) and for the daemon's passes. The lock file is left out: it holds the running agent's pid.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import type { Config } from "../../lib/config/types.ts";
import type { SimNode } from "../../lib/sim/node.ts";
import { DaemonFixture } from "../admin/harness.ts";
import { runCli } from "../helpers/cli.ts";
import { withNode } from "../helpers/sim_node.ts";

const DIRS = ["staticPodDir", "inactiveDir", "secretsDir", "configmapsDir", "stateDir"] as const;

/**
 * ctime, mtime, mode, owner, inode and size of each configured directory and everything below
 * it. From find(1): Deno's stat gives ctime in whole seconds, find gives nanoseconds.
 */
async function metadata(config: Config): Promise<Record<string, string>> {
  const out = await new Deno.Command("find", {
    args: [
      ...DIRS.map((key) => config[key]),
      "-printf",
      "%p\tctime %C@ mtime %T@ %#m %U:%G ino %i size %s\n",
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) throw new Error(`find: ${new TextDecoder().decode(out.stderr)}`);
  const lines = new TextDecoder().decode(out.stdout).trim().split("\n");
  return Object.fromEntries(lines.map((line) => line.split("\t") as [string, string]));
}

async function once(configFile: string) {
  const r = await runCli(["--once", "--config", configFile, "--output", "json"]);
  return { code: r.code, stderr: r.stderr, report: JSON.parse(r.stdout) };
}

async function assertIdleOnce(node: SimNode, configFile: string, code: number) {
  const before = await metadata(node.config());
  for (let i = 0; i < 3; i++) {
    const r = await once(configFile);
    assertEquals([r.code, r.report.applied, r.report.bytesWritten], [code, [], 0], r.stderr);
    assertEquals(await metadata(node.config()), before, `--once number ${i + 1}`);
  }
}

Deno.test("three idle --once passes change no metadata, with the control plane up and during an outage", async () => {
  await withNode(async (node, configFile) => {
    assertEquals((await once(configFile)).code, 0);
    await assertIdleOnce(node, configFile, 0);

    // Active checkpoints, run by the kubelet, and their sandboxes recorded: idle again after.
    await node.loseControlPlane();
    assertEquals((await once(configFile)).code, 1);
    await node.sync();
    assertEquals((await once(configFile)).report.applied.length, 3);
    await assertIdleOnce(node, configFile, 1);
  });
});

Deno.test("idle daemon passes change no metadata, refreshes of secrets and configmaps included", async () => {
  const f = await DaemonFixture.start();
  try {
    await f.pass();
    const before = await metadata(f.config);
    for (let i = 0; i < 4; i++) {
      // Past the refresh interval: every secret and configmap is fetched and compared again.
      f.clock.advance(f.config.refreshIntervalMs);
      const report = await f.pass();
      assertEquals([report.complete, report.applied, report.bytesWritten], [true, [], 0]);
      assertEquals(await metadata(f.config), before, `daemon pass ${i + 2}`);
    }
  } finally {
    await f.close();
  }
});
