/**
 * The daemon on a node whose state dir cannot be written (a real tmpfs, read-only from the start
 * or remounted read-only under the running daemon): checkpoints are still activated, withdrawn
 * and removed after their grace period (a fake clock; the deadline kept in memory), every pass
 * logs once what it could not record, and everything pending is written once the tmpfs is
 * remounted read-write, without a restart.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { DaemonFixture } from "../admin/harness.ts";
import { formatInstant } from "../../lib/core/time.ts";
import { TMPFS_UNAVAILABLE, withTmpfs } from "../helpers/tmpfs.ts";
import { held, onDisk } from "../store/records.ts";

const APISERVER = "kube-system/kube-apiserver-7x2kq";
const CONTROLLER = "kube-system/kube-controller-manager-m4t9z";
const SCHEDULER = "kube-system/kube-scheduler-q8w2c";
const PARENTS = [APISERVER, CONTROLLER, SCHEDULER];
const MB = 1024 * 1024;
const NOT_RECORDED = "state not recorded; it is written again on the next pass";

function manifest(id: string) {
  return `${id.replace("/", "-")}.json`;
}

function names(dir: string): string[] {
  return [...Deno.readDirSync(dir)].map((e) => e.name).filter((n) => n.endsWith(".json")).sort();
}

/** A daemon whose state dir is `stateDir` on the tmpfs, closed whatever happens. */
async function withDaemon(stateDir: string, fn: (f: DaemonFixture) => Promise<void>) {
  const f = await DaemonFixture.start({ stateDir, checkpointGracePeriodMs: 60_000 });
  try {
    await fn(f);
  } finally {
    await f.close();
  }
}

/** One pass `ms` later; asserts that it logged at most one line about what it did not record. */
async function passAfter(f: DaemonFixture, ms: number) {
  f.clock.advance(ms);
  const before = f.log.find(NOT_RECORDED).length;
  const report = await f.pass();
  const said = f.log.find(NOT_RECORDED).slice(before);
  assert(said.length <= 1, JSON.stringify(said));
  return { report, said: said[0] };
}

Deno.test({
  name:
    "daemon, state dir read-only from the start: activates, records sandboxes in memory, writes it all once remounted rw",
  ignore: TMPFS_UNAVAILABLE !== undefined,
  fn: () =>
    withTmpfs(MB, async (fs) => {
      await fs.readOnly(true);
      const stateDir = fs.path("var/lib/ckpt-agent");
      await withDaemon(stateDir, async (f) => {
        let { report, said } = await passAfter(f, 0);
        assertEquals(report.plan.stops, PARENTS);
        assertEquals(report.errors.map((e) => [e.op, e.id]), PARENTS.map((id) => ["status", id]));
        assertEquals(said.checkpoints, PARENTS);
        assertEquals(said.path, join(stateDir, "status", "kube-system_kube-apiserver-7x2kq.json"));
        assert(String(said.error).includes("Read-only file system"), String(said.error));
        // Said at error when it starts; the passes after say it again at debug only.
        assertEquals(said.level, "error");

        await f.node.loseControlPlane();
        ({ report } = await passAfter(f, 5_000));
        assertEquals(report.plan.starts, PARENTS);
        assertEquals(names(f.config.staticPodDir), PARENTS.map(manifest));
        // The kubelet runs the copies: their sandboxes are known, but cannot be recorded.
        ({ report, said } = await passAfter(f, 5_000));
        assertEquals(report.errors.filter((e) => e.op === "sandbox-record").length, 3);
        assertEquals((said.sandboxes as string[]).length, 3);
        assertEquals(said.level, "debug");
        assertEquals(f.stores.sandboxes.list().length, 3);

        await fs.readOnly(false);
        ({ report, said } = await passAfter(f, 5_000));
        assertEquals([report.errors, said], [[], undefined]);
        assertEquals(f.log.find("write succeeds again").map((l) => l.op), ["records"]);
        assertEquals(report.applied.filter((a) => a.op === "sandbox-record").length, 3);
        const stored = await onDisk(stateDir);
        assertEquals(stored, held(f.stores));
        assertEquals(
          stored.status.map((r) => [r.id, r.state]),
          PARENTS.map((id) => [id, "active"]),
        );
        // What was held is what was stored: when it was activated, not when it was written.
        assertEquals(
          stored.status[0].lastActivatedAt,
          formatInstant(f.clock.now() - 10_000n * 1_000_000n),
        );
        assertEquals(f.stores.unrecorded(), []);
      });
    }),
});

Deno.test({
  name:
    "daemon, state dir remounted read-only under it: withdraws, keeps the grace deadline, removes after it, writes it all later",
  ignore: TMPFS_UNAVAILABLE !== undefined,
  fn: () =>
    withTmpfs(MB, async (fs) => {
      const stateDir = fs.path("state");
      await withDaemon(stateDir, async (f) => {
        await passAfter(f, 0);
        await f.node.loseControlPlane();
        await passAfter(f, 5_000);
        await passAfter(f, 5_000); // sandboxes recorded
        assertEquals(await onDisk(stateDir), held(f.stores));

        await fs.readOnly(true);
        await f.node.restoreControlPlane();
        let { report, said } = await passAfter(f, 5_000);
        assertEquals(report.plan.stops, PARENTS);
        assertEquals(names(f.config.staticPodDir), []);
        assertEquals(said.checkpoints, PARENTS);
        assertEquals((said.sandboxes as string[]).length, 3);

        // The scheduler's parent is deleted: 60 s of grace, counted from now and never again.
        await f.node.deleteParent(SCHEDULER);
        ({ report } = await passAfter(f, 5_000));
        const graceEnd = formatInstant(f.clock.now() + 60_000n * 1_000_000n);
        assertEquals(report.plan.state[SCHEDULER], { state: "inactive-grace", graceEnd });
        for (let i = 0; i < 6; i++) {
          ({ report } = await passAfter(f, 5_000));
          assertEquals(report.plan.state[SCHEDULER], { state: "inactive-grace", graceEnd });
        }
        ({ report } = await passAfter(f, 31_000)); // 61 s after the deletion was seen
        assertEquals(report.plan.removes, [SCHEDULER]);
        assert(!(names(f.config.inactiveDir)).includes(manifest(SCHEDULER)));
        assertEquals(f.stores.status.list().map((r) => r.id), [APISERVER, CONTROLLER]);

        await fs.readOnly(false);
        ({ report, said } = await passAfter(f, 5_000));
        assertEquals([report.complete, said], [true, undefined]);
        const stored = await onDisk(stateDir);
        assertEquals(stored, held(f.stores));
        assertEquals(stored.status.map((r) => [r.id, r.state]), [
          [APISERVER, "inactive"],
          [CONTROLLER, "inactive"],
        ]);
        assertEquals(stored.sandboxes, []);
      });
    }),
});
