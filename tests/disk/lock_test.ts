/**
 * The single-instance lock, with real processes: a crash must never block a restart, and a full
 * or read-only disk never stops the agent.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { dirname, join } from "node:path";
import { defaultConfig } from "../../lib/config/load.ts";
import { acquireLock, isLock, type Lock, type LockHeld } from "../../lib/disk/lock.ts";
import { withTempDir } from "../helpers/temp_dir.ts";
import { TMPFS_UNAVAILABLE, withTmpfs } from "../helpers/tmpfs.ts";
import { asUser, startHolder, USER, whileUserHolds } from "./lock_holder.ts";

Deno.test("a second process is told who holds the lock; SIGKILL of the holder frees it", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/run/ckpt-agent.lock`;
    const first = await startHolder([path]);
    try {
      assertEquals(first.line, `acquired ${first.child.pid}`);
      assertEquals(await Deno.readTextFile(path), `${first.child.pid}\n`);

      const second = await startHolder([path]);
      assertEquals(second.line, `held ${first.child.pid}`);
      assertEquals((await second.child.status).code, 0);
      assertEquals(await acquireLock(path), { heldBy: first.child.pid });
    } finally {
      first.child.kill("SIGKILL");
      await first.child.status;
    }
    // The crashed holder's pid is still in the file; the lock is not.
    assertEquals(await Deno.readTextFile(path), `${first.child.pid}\n`);
    const third = await startHolder([path]);
    try {
      assertEquals(third.line, `acquired ${third.child.pid}`);
    } finally {
      assertEquals(await third.stop(), 0);
    }
  });
});

Deno.test("release empties the pid and lets the next one in; the file stays", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/ckpt-agent.lock`;
    await Deno.writeTextFile(path, "not a pid, left by something else\n");
    const lock = await acquireLock(path);
    assert(isLock(lock));
    assertEquals(await Deno.readTextFile(path), `${Deno.pid}\n`);
    // flock is per open file: even this process cannot take it twice.
    assertEquals(await acquireLock(path), { heldBy: Deno.pid });
    await lock.release();
    assertEquals(await Deno.readTextFile(path), "");

    const again = await acquireLock(path);
    assert(isLock(again));
    // Held, but no pid written yet (or an unreadable one): the holder is unknown.
    await Deno.writeTextFile(path, "garbage");
    assertEquals(await acquireLock(path), { heldBy: undefined });
    await again.release();
  });
});

Deno.test("a lock file deleted under its holder does not block the next agent", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/ckpt-agent.lock`;
    const first = await acquireLock(path);
    assert(isLock(first));
    // Someone removes the file: the next agent locks a new file at the path, and a third is
    // told about that one.
    await Deno.remove(path);
    const second = await acquireLock(path);
    assert(isLock(second));
    assertEquals(await acquireLock(path), { heldBy: Deno.pid });
    await second.release();
    await first.release();
  });
});

Deno.test({
  name: "a full disk: the pid cannot be written, the lock is held all the same",
  ignore: TMPFS_UNAVAILABLE !== undefined,
  fn: () =>
    withTmpfs(64 * 1024, async (fs) => {
      const path = fs.path("run/ckpt-agent.lock");
      await fs.fill();
      const lock = await acquireLock(path);
      assert(isLock(lock));
      assertEquals(lock.held, true);
      assert(lock.problem?.includes("No space left on device"), lock.problem);
      assertEquals(await Deno.readTextFile(path), "");
      // Held: another process is kept out, though it cannot be told by whom.
      const other = await startHolder([path]);
      assertEquals(other.line, "held undefined");
      await other.child.status;
      await lock.release();
      const again = await acquireLock(path);
      assert(isLock(again) && again.held);
      await again.release();
    }),
});

Deno.test({
  name: "a lock file on a read-only mount is still locked; the pid is not written",
  ignore: TMPFS_UNAVAILABLE !== undefined,
  fn: () =>
    withTmpfs(64 * 1024, async (fs) => {
      // Made as the agent makes it: readable by root alone (the mount's root is 0755).
      const path = fs.path("ckpt-agent.lock");
      await Deno.writeTextFile(path, "", { mode: 0o600 });
      await fs.readOnly(true);
      const first = await startHolder([path]);
      try {
        assertEquals(first.line, `acquired ${first.child.pid}`);
        const lock = await acquireLock(path);
        assertEquals(isLock(lock), false);
      } finally {
        assertEquals(await first.stop(), 0);
      }
      const lock = await acquireLock(path);
      assert(isLock(lock));
      assertEquals(lock.held, true);
      assert(lock.problem?.includes("Read-only file system"), lock.problem);
      await lock.release();
    }),
});

Deno.test({
  name: "a lock file that cannot be created: no lock, said, and the agent may go on",
  ignore: TMPFS_UNAVAILABLE !== undefined,
  fn: () =>
    withTmpfs(64 * 1024, async (fs) => {
      await fs.readOnly(true);
      for (const path of [fs.path("ckpt-agent.lock"), fs.path("missing/dir/ckpt-agent.lock")]) {
        const lock = await acquireLock(path);
        assert(isLock(lock));
        assertEquals(lock.held, false);
        assert(
          lock.problem?.startsWith("no lock taken: the lock file cannot be created: Read-only"),
          lock.problem,
        );
        await lock.release();
      }
    }),
});

/**
 * A node's /run under a temp root a local user can enter: `run` root's 0755, and `run/lock`
 * world-writable and sticky, as the system's /run/lock (the directory of the old default).
 */
async function withRun(fn: (root: string) => Promise<void>) {
  await withTempDir(async (root) => {
    await Deno.mkdir(join(root, "run/lock"), { recursive: true });
    for (const [dir, mode] of [["", 0o755], ["run", 0o755], ["run/lock", 0o1777]] as const) {
      await Deno.chmod(join(root, dir), mode);
    }
    await fn(root);
  });
}

/** No lock, and why: the agent goes on without it. */
function refused(result: Lock | LockHeld, why: string) {
  assert(isLock(result), `not refused: ${JSON.stringify(result)}`);
  assertEquals(result.held, false);
  assert(
    result.problem?.startsWith("no lock taken: ") && result.problem.includes(why),
    result.problem,
  );
}

async function owner(path: string) {
  const info = await Deno.lstat(path);
  return { uid: info.uid, mode: info.mode! & 0o7777 };
}

Deno.test("the default lock is in a directory root makes 0700: a user's flock on the old default path keeps no agent out", async () => {
  await withRun(async (root) => {
    // A local user creates the old default /run/lock/ckpt-agent.lock and holds its flock.
    await whileUserHolds(join(root, "run/lock/ckpt-agent.lock"), async () => {
      const path = join(root, defaultConfig("cp-1").lockFile);
      const lock = await acquireLock(path);
      assert(isLock(lock) && lock.held && lock.problem === undefined, JSON.stringify(lock));
      await lock.release();
      assertEquals(dirname(defaultConfig("cp-1").lockFile), "/run/ckpt-agent");
      assertEquals(await owner(dirname(path)), { uid: 0, mode: 0o700 });
      assertEquals(await owner(path), { uid: 0, mode: 0o600 });
    });
  });
});

Deno.test("a lock file in a directory any user can write: no lock, never 'held' on that user's word, and the user's file untouched", async () => {
  await withRun(async (root) => {
    const path = join(root, "run/lock/ckpt-agent.lock");
    await whileUserHolds(path, async () => {
      await Deno.writeTextFile(path, "the user's\n");
      const agent = await startHolder([path]);
      assert(agent.line.startsWith("no lock: no lock taken: "), agent.line);
      assertEquals(await agent.stop(), 0);
      refused(
        await acquireLock(path),
        `the lock directory ${join(root, "run/lock")} is writable by group or others (mode 01777)`,
      );
      assertEquals(await Deno.readTextFile(path), "the user's\n");
      assertEquals((await owner(path)).uid, USER);
    });
  });
});

Deno.test("a lock directory a user made, or planted as a symlink, is refused; nothing it leads to is written", async () => {
  await withRun(async (root) => {
    // Root's own file, which the user would like truncated.
    const victim = join(root, "victim");
    await Deno.mkdir(victim, { mode: 0o700 });
    await Deno.writeTextFile(join(victim, "lock"), "precious\n", { mode: 0o600 });
    const planted = join(root, "run/lock/ckpt-agent");
    await asUser("ln", "-s", victim, planted);
    refused(await acquireLock(join(planted, "lock")), `the lock directory ${planted} is a symlink`);
    assertEquals(await Deno.readTextFile(join(victim, "lock")), "precious\n");

    await Deno.remove(planted);
    await asUser("mkdir", planted);
    await whileUserHolds(join(planted, "lock"), async () => {
      refused(
        await acquireLock(join(planted, "lock")),
        `the lock directory ${planted} is owned by uid ${USER}, not root`,
      );
      assertEquals(await Deno.readTextFile(join(planted, "lock")), "");
    });
  });
});

Deno.test("a symlink for the lock file or its directory is refused, even root's: its target is neither truncated nor created", async () => {
  await withTempDir(async (root) => {
    const dir = join(root, "ckpt-agent");
    await Deno.mkdir(dir, { mode: 0o700 });
    const victim = join(root, "etcd.yaml");
    await Deno.writeTextFile(victim, "precious\n");
    const path = join(dir, "lock");
    for (const target of [victim, join(root, "nothing")]) {
      await Deno.symlink(target, path);
      refused(await acquireLock(path), `the lock file ${path} is a symlink`);
      await Deno.remove(path);
    }
    assertEquals(await Deno.readTextFile(victim), "precious\n");
    assertEquals(await Deno.lstat(join(root, "nothing")).catch((e) => e.name), "NotFound");

    const elsewhere = join(root, "elsewhere");
    await Deno.mkdir(elsewhere, { mode: 0o700 });
    await Deno.symlink(elsewhere, join(root, "linked"));
    refused(
      await acquireLock(join(root, "linked/lock")),
      `the lock directory ${join(root, "linked")} is a symlink`,
    );
    assertEquals([...Deno.readDirSync(elsewhere)], []);
  });
});

Deno.test("a lock file root alone did not make is refused and left as it is", async () => {
  await withRun(async (root) => {
    const dir = join(root, "run/ckpt-agent");
    await Deno.mkdir(dir, { mode: 0o755 });
    const path = join(dir, "lock");
    // Readable by others in a directory they can enter: any user can open it and hold its flock.
    await Deno.writeTextFile(path, "left\n", { mode: 0o644 });
    await whileUserHolds(path, async () => {
      refused(
        await acquireLock(path),
        `the lock file ${path} can be opened by group or others (mode 0644) in a directory ` +
          "they can enter (mode 0755)",
      );
    });
    // The same file in a directory no one else can enter is root's alone.
    await Deno.chmod(dir, 0o700);
    const lock = await acquireLock(path);
    assert(isLock(lock) && lock.held, JSON.stringify(lock));
    await lock.release();
    await Deno.chmod(dir, 0o755);
    await Deno.chmod(path, 0o600);
    await Deno.writeTextFile(path, "left\n");

    await Deno.chown(path, USER, USER);
    refused(await acquireLock(path), `the lock file ${path} is owned by uid ${USER}, not root`);
    await Deno.chown(path, 0, 0);
    await Deno.link(path, join(root, "second-name"));
    refused(await acquireLock(path), `the lock file ${path} has 2 links`);
    assertEquals(await Deno.readTextFile(path), "left\n");
    await Deno.remove(path);
    for (const [make, args] of [["mkfifo", [path]], ["mkdir", [path]]] as const) {
      assert((await new Deno.Command(make, { args: [...args] }).output()).success);
      refused(await acquireLock(path), `the lock file ${path} is not a regular file`);
      await Deno.remove(path);
    }
  });
});
