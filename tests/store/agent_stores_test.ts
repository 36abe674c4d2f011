/**
 * AgentStores on state dirs that refuse writes: real tmpfs mounts that are read-only from the
 * start or turn read-only, a quarantine that cannot be made, and EIO through the store's writer
 * (an I/O error cannot be produced for real here: there is no device-mapper to fail a block
 * device, so the injected writer throws what the kernel would). Memory always holds what the
 * agent knows; every difference is written once the state dir takes it.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { LogCapture } from "../admin/harness.ts";
import { atomicWrite } from "../../lib/disk/atomic_write.ts";
import { AgentStores } from "../../lib/store/agent_stores.ts";
import type { Writer } from "../../lib/store/record_store.ts";
import { TMPFS_UNAVAILABLE, withTmpfs } from "../helpers/tmpfs.ts";
import { held, onDisk, plant, sandboxCheckpoint, statusRecord, withStateDir } from "./records.ts";

const A = "kube-system/kube-apiserver";
const B = "kube-system/etcd";
const SANDBOX = "4f1b9c0e7a2d";
const MB = 1024 * 1024;

Deno.test({
  name:
    "a state dir read-only from the start, its directories missing: held in memory, written once remounted rw",
  ignore: TMPFS_UNAVAILABLE !== undefined,
  fn: () =>
    withTmpfs(MB, async (fs) => {
      const stateDir = fs.path("var/lib/ckpt-agent");
      await fs.readOnly(true);
      const log = new LogCapture();
      const stores = await AgentStores.open(stateDir, log.logger);
      assert(stores.readOnly?.includes("Read-only file system"), stores.readOnly);
      assertEquals(
        log.find(
          "state dir cannot be written: records are served read-only, " +
            "kept in memory, and written once it can be (tried every pass)",
        ).length,
        1,
      );

      stores.setStatus(A, statusRecord(A));
      stores.setSandbox(SANDBOX, sandboxCheckpoint());
      for (let pass = 0; pass < 3; pass++) {
        const outcome = await stores.record();
        assertEquals(outcome.status.unrecorded.map((u) => [u.key, u.op]), [[A, "write"]]);
        assertEquals(outcome.sandboxes.unrecorded.map((u) => [u.key, u.op]), [[SANDBOX, "write"]]);
      }
      const [first] = stores.unrecorded();
      assertEquals(first.path, join(stateDir, "status", "kube-system_kube-apiserver.json"));
      assert(first.error.includes("Read-only file system"), first.error);
      // Said once, not on every attempt.
      assertEquals(log.lines.filter((l) => l.msg.startsWith("state dir cannot")).length, 1);
      assertEquals(held(stores), { status: [statusRecord(A)], sandboxes: [SANDBOX] });

      await fs.readOnly(false);
      const outcome = await stores.record();
      assertEquals([outcome.status.written, outcome.sandboxes.written], [[A], [SANDBOX]]);
      assertEquals([stores.readOnly, stores.unrecorded()], [undefined, []]);
      assertEquals(await onDisk(stateDir), held(stores));
      assertEquals(
        log.find(
          "state dir writable again: every record not yet written is " +
            "written now",
        ).length,
        1,
      );
    }),
});

Deno.test({
  name:
    "a state dir that turns read-only after records exist: read at start, changes kept and written later",
  ignore: TMPFS_UNAVAILABLE !== undefined,
  fn: () =>
    withTmpfs(MB, async (fs) => {
      const stateDir = fs.path("state");
      const log = new LogCapture();
      const before = await AgentStores.open(stateDir, log.logger);
      before.setStatus(A, statusRecord(A));
      before.setStatus(B, statusRecord(B));
      before.setSandbox(SANDBOX, sandboxCheckpoint());
      await before.record();

      await fs.readOnly(true);
      // A new process (--once) on the read-only dir serves what is stored.
      const stores = await AgentStores.open(stateDir, log.logger);
      assertEquals(held(stores), held(before));
      const grace = statusRecord(A, { state: "inactive-grace", graceEnd: "2026-01-01T00:01:00Z" });
      stores.setStatus(A, grace);
      stores.forgetStatus(B);
      stores.forgetSandbox(SANDBOX);
      const failed = await stores.record();
      assertEquals(
        [...failed.status.unrecorded, ...failed.sandboxes.unrecorded].map((u) => [u.key, u.op]),
        [[B, "delete"], [A, "write"], [SANDBOX, "delete"]],
      );
      assertEquals(held(stores), { status: [grace], sandboxes: [] });

      await fs.readOnly(false);
      const done = await stores.record();
      assertEquals([done.status.written, done.status.deleted, done.sandboxes.deleted], [
        [A],
        [B],
        [SANDBOX],
      ]);
      assertEquals(await onDisk(stateDir), { status: [grace], sandboxes: [] });
      // Nothing left to do: the next record writes nothing.
      const idle = await stores.record();
      assertEquals([idle.status.written, idle.sandboxes.written, stores.unrecorded()], [
        [],
        [],
        [],
      ]);
    }),
});

Deno.test({
  name: "a full state dir: nothing torn, the record written once there is space",
  ignore: TMPFS_UNAVAILABLE !== undefined,
  fn: () =>
    withTmpfs(MB, async (fs) => {
      const stateDir = fs.path("state");
      const stores = await AgentStores.open(stateDir, new LogCapture().logger);
      stores.setStatus(A, statusRecord(A));
      await stores.record();
      const ballast = await fs.fill();
      stores.setStatus(A, statusRecord(A, { state: "active", message: "activated" }));
      stores.setStatus(B, statusRecord(B));
      const full = await stores.record();
      assertEquals(full.status.unrecorded.map((u) => u.key), [B, A]);
      assert(full.status.unrecorded[0].error.includes("No space left on device"));
      assertEquals(await onDisk(stateDir), { status: [statusRecord(A)], sandboxes: [] });
      assertEquals([...Deno.readDirSync(join(stateDir, "status"))].map((e) => e.name), [
        "kube-system_kube-apiserver.json",
      ]);

      await Deno.remove(ballast);
      await stores.record();
      assertEquals(await onDisk(stateDir), held(stores));
    }),
});

Deno.test("EIO on every write: records kept in memory and retried; written when the writes succeed", async () => {
  await withStateDir(async (stateDir) => {
    let failing = true;
    const writer: Writer = (path, data, opts) => {
      if (failing) return Promise.reject(new Error("Input/output error (os error 5)"));
      return atomicWrite(path, data, opts);
    };
    const stores = await AgentStores.open(stateDir, new LogCapture().logger, { writer });
    stores.setStatus(A, statusRecord(A));
    stores.setSandbox(SANDBOX, sandboxCheckpoint());
    await stores.record();
    await stores.record();
    assertEquals(stores.unrecorded().map((u) => [u.store, u.key, u.error]), [
      ["status", A, "Input/output error (os error 5)"],
      ["sandboxes", SANDBOX, "Input/output error (os error 5)"],
    ]);
    assertEquals(await onDisk(stateDir), { status: [], sandboxes: [] });
    failing = false;
    await stores.record();
    assertEquals(stores.unrecorded(), []);
    assertEquals(await onDisk(stateDir), held(stores));
  });
});

Deno.test({
  name:
    "a bad record that cannot be moved to quarantine: served read-only until it can, never written over",
  ignore: TMPFS_UNAVAILABLE !== undefined,
  fn: () =>
    withTmpfs(MB, async (fs) => {
      const stateDir = fs.path("state");
      const first = await AgentStores.open(stateDir, new LogCapture().logger);
      first.setStatus(B, statusRecord(B));
      await first.record();
      await plant(join(stateDir, "status"), [
        { name: "kube-system_kube-apiserver.json", code: "bad-json", content: "{ torn" },
      ]);
      await fs.readOnly(true);

      const log = new LogCapture();
      const stores = await AgentStores.open(stateDir, log.logger);
      assert(stores.readOnly?.startsWith("bad records could not be moved to quarantine"));
      assertEquals(stores.status.list().map((r) => r.id), [B]);
      stores.setStatus(A, statusRecord(A));
      await stores.record();
      assertEquals(stores.unrecorded().map((u) => u.key), [A]);

      await fs.readOnly(false);
      await stores.record();
      assertEquals([stores.readOnly, stores.unrecorded()], [undefined, []]);
      const quarantined = log.find("bad record moved to quarantine");
      assertEquals(quarantined.length, 1);
      assert(String(quarantined[0].quarantinedTo).startsWith(join(stateDir, "quarantine")));
      assertEquals(await onDisk(stateDir), held(stores));
    }),
});
