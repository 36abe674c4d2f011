/**
 * The single-instance lock, with real processes: a crash must never block a restart, and a full
 * or read-only disk never stops the agent.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { acquireLock, isLock } from "../../lib/disk/lock.ts";
import { withTempDir } from "../helpers/temp_dir.ts";
import { TMPFS_UNAVAILABLE, withTmpfs } from "../helpers/tmpfs.ts";

const HOLDER = new URL("./lock_holder.ts", import.meta.url).pathname;

interface Holder {
  child: Deno.ChildProcess;
  /** The first line the holder printed. */
  line: string;
}

async function startHolder(path: string): Promise<Holder> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", "--quiet", HOLDER, path],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  let line = "";
  const lines = child.stdout.pipeThrough(new TextDecoderStream());
  for await (const chunk of lines) {
    line += chunk;
    if (line.includes("\n")) break;
  }
  return { child, line: line.trimEnd() };
}

Deno.test("a second process is told who holds the lock; SIGKILL of the holder frees it", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/run/ckpt-agent.lock`;
    const first = await startHolder(path);
    try {
      assertEquals(first.line, `acquired ${first.child.pid}`);
      assertEquals(await Deno.readTextFile(path), `${first.child.pid}\n`);

      const second = await startHolder(path);
      assertEquals(second.line, `held ${first.child.pid}`);
      assertEquals((await second.child.status).code, 0);
      assertEquals(await acquireLock(path), { heldBy: first.child.pid });
    } finally {
      first.child.kill("SIGKILL");
      await first.child.status;
    }
    // The crashed holder's pid is still in the file; the lock is not.
    assertEquals(await Deno.readTextFile(path), `${first.child.pid}\n`);
    const third = await startHolder(path);
    try {
      assertEquals(third.line, `acquired ${third.child.pid}`);
    } finally {
      third.child.stdin.close();
      assertEquals((await third.child.status).code, 0);
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
      const other = await startHolder(path);
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
      const path = fs.path("ckpt-agent.lock");
      await Deno.writeTextFile(path, "");
      await fs.readOnly(true);
      const first = await startHolder(path);
      try {
        assertEquals(first.line, `acquired ${first.child.pid}`);
        const lock = await acquireLock(path);
        assertEquals(isLock(lock), false);
      } finally {
        first.child.stdin.close();
        assertEquals((await first.child.status).code, 0);
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
