/**
 * `ckpt-agent --once` (a subprocess, as a runbook runs it) on a node whose state dir or lock file
 * cannot be written — real tmpfs mounts, read-only from the start, turned read-only after records
 * exist, or full: the control plane comes first, so the checkpoints are activated anyway; the
 * pass says what it could not record and exits 1. `--once --dry-run` and `status` still read.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import type { PassReport } from "../../lib/pass/report.ts";
import type { Config } from "../../lib/config/types.ts";
import type { SimNode } from "../../lib/sim/node.ts";
import { runCli } from "../helpers/cli.ts";
import { withNode } from "../helpers/sim_node.ts";
import { TMPFS_UNAVAILABLE, withTmpfs } from "../helpers/tmpfs.ts";
import { onDisk } from "../store/records.ts";

const PARENTS = [
  "kube-system/kube-apiserver-7x2kq",
  "kube-system/kube-controller-manager-m4t9z",
  "kube-system/kube-scheduler-q8w2c",
];
const MB = 1024 * 1024;

function manifests(dir: string): string[] {
  // As the kubelet reads the dir: the inactive dir's `.versions` is no manifest.
  return [...Deno.readDirSync(dir)].map((e) => e.name)
    .filter((n) => !n.endsWith(".yaml") && !n.startsWith(".")).sort();
}

const ACTIVE = PARENTS.map((id) => `${id.replace("/", "-")}.json`);

async function once(configFile: string, ...flags: string[]) {
  const r = await runCli(["--once", "--config", configFile, ...flags]);
  assert(r.stdout.trim() !== "", `no output; exit ${r.code}; stderr: ${r.stderr}`);
  return r;
}

async function onceJson(configFile: string) {
  const r = await once(configFile, "--output", "json");
  return { ...r, report: JSON.parse(r.stdout) as PassReport };
}

/** A node whose state dir (and lock file, when asked) is on a tmpfs of its own. */
function withNodeOnTmpfs(
  settings: (fs: { path(...parts: string[]): string }) => Partial<Config>,
  fn: (
    node: SimNode,
    configFile: string,
    fs: Parameters<Parameters<typeof withTmpfs>[1]>[0],
  ) => Promise<void>,
) {
  return withTmpfs(MB, (fs) =>
    withNode(async (node) => {
      await fn(node, await node.writeConfigFile(settings(fs)), fs);
    }));
}

Deno.test({
  name:
    "--once, state dir read-only from the start and never created: checkpoints made and activated, exit 1",
  ignore: TMPFS_UNAVAILABLE !== undefined,
  fn: () =>
    withNodeOnTmpfs(
      (fs) => ({ stateDir: fs.path("var/lib/ckpt-agent") }),
      async (node, configFile, fs) => {
        await fs.readOnly(true);
        const first = await onceJson(configFile);
        assertEquals(first.code, 1, first.stderr);
        assertEquals(first.report.plan.stops, PARENTS);
        assertEquals(
          first.report.errors.map((e) => [e.op, e.id]),
          PARENTS.map((id) => ["status", id]),
        );
        assertEquals(manifests(node.config().inactiveDir), ACTIVE);

        await node.loseControlPlane();
        const r = await once(configFile);
        assertEquals(r.code, 1, r.stderr);
        assertEquals(manifests(node.config().staticPodDir), ACTIVE);
        assert(r.stdout.includes(`  started: ${PARENTS.join(", ")}`), r.stdout);
        assert(
          r.stdout.includes(
            `  NOT RECORDED: 3 record(s) in ${fs.path("var/lib/ckpt-agent")};`,
          ),
          r.stdout,
        );
        assert(r.stderr.includes("state dir cannot be written"), r.stderr);

        // Reading still works.
        const dryRun = await once(configFile, "--dry-run");
        assertEquals(dryRun.code, 1);
        assert(
          dryRun.stdout.startsWith("ckpt-agent: dry run, nothing written; degraded"),
          dryRun.stdout,
        );
        const status = await runCli(["status", "--config", configFile]);
        assertEquals(status.code, 0, status.stderr);
      },
    ),
});

Deno.test({
  name:
    "--once, state dir turned read-only after records exist: activates, says what is not recorded, records it once rw",
  ignore: TMPFS_UNAVAILABLE !== undefined,
  fn: () =>
    withNodeOnTmpfs((fs) => ({ stateDir: fs.path("state") }), async (node, configFile, fs) => {
      assertEquals((await onceJson(configFile)).code, 0);
      await fs.readOnly(true);
      await node.loseControlPlane();
      const r = await onceJson(configFile);
      assertEquals(r.code, 1);
      assertEquals(r.report.plan.starts, PARENTS);
      assertEquals(manifests(node.config().staticPodDir), ACTIVE);
      assertEquals(r.report.errors.map((e) => [e.op, e.id]), PARENTS.map((id) => ["status", id]));
      assert(
        r.report.errors[0].message.includes("Read-only file system"),
        r.report.errors[0].message,
      );

      const status = await runCli(["status", "--config", configFile, "--output", "json"]);
      assertEquals(status.code, 0, status.stderr);
      assertEquals(JSON.parse(status.stdout).checkpoints.map((c: { state: string }) => c.state), [
        "inactive",
        "inactive",
        "inactive",
      ]);
      assertEquals((await once(configFile, "--dry-run")).code, 1);

      await fs.readOnly(false);
      const again = await onceJson(configFile);
      assertEquals([again.code, again.report.errors], [1, []]); // degraded: the outage
      const stored = await onDisk(fs.path("state"));
      assertEquals(stored.status.map((s) => s.state), ["active", "active", "active"]);
    }),
});

Deno.test({
  name: "--once, a full state dir with the lock file on it: activates all the same, exit 1",
  ignore: TMPFS_UNAVAILABLE !== undefined,
  fn: () =>
    withNodeOnTmpfs(
      (fs) => ({ stateDir: fs.path("state"), lockFile: fs.path("lock/ckpt-agent.lock") }),
      async (node, configFile, fs) => {
        assertEquals((await onceJson(configFile)).code, 0);
        await fs.fill();
        await node.loseControlPlane();
        const r = await onceJson(configFile);
        assertEquals(r.code, 1);
        assertEquals(r.report.plan.starts, PARENTS);
        assertEquals(manifests(node.config().staticPodDir), ACTIVE);
        assertEquals(r.report.errors.map((e) => e.op), ["status", "status", "status"]);
        assert(r.report.errors[0].message.includes("No space left on device"));
        assert(r.stderr.includes("lock held, but its file does not say by whom"), r.stderr);
        assertEquals(await Deno.readTextFile(fs.path("lock/ckpt-agent.lock")), "");
      },
    ),
});

Deno.test({
  name: "--once, a lock file that cannot be created: runs without the lock, says so, exit 1",
  ignore: TMPFS_UNAVAILABLE !== undefined,
  fn: () =>
    withNodeOnTmpfs(
      (fs) => ({ lockFile: fs.path("run/lock/ckpt-agent.lock") }),
      async (node, configFile, fs) => {
        assertEquals((await onceJson(configFile)).code, 0);
        await Deno.remove(fs.path("run"), { recursive: true });
        await fs.readOnly(true);
        await node.loseControlPlane();
        const r = await once(configFile);
        assertEquals(r.code, 1);
        assertEquals(manifests(node.config().staticPodDir), ACTIVE);
        assert(
          r.stdout.includes("  NO LOCK: no lock taken: the lock file cannot be created"),
          r.stdout,
        );
        assert(r.stderr.includes("running without the single-agent lock"), r.stderr);
      },
    ),
});
