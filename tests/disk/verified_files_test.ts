/** Remembered file checks: trusted only while lstat shows the file as it was, never when racy. */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { join } from "node:path";
import { atomicWrite } from "../../lib/disk/atomic_write.ts";
import { TRUSTED_AGE_MS, VerifiedFiles } from "../../lib/disk/verified_files.ts";
import { withTempDir } from "../helpers/temp_dir.ts";

/** A check made long after the file was last changed. */
function checkedLater(): VerifiedFiles {
  return new VerifiedFiles(() => Date.now() + 10 * TRUSTED_AGE_MS);
}

Deno.test("a checked file is trusted for its key until it is written, replaced, chmodded or deleted", async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, "a.json");
    await atomicWrite(path, "one", { mode: 0o600 });
    const files = checkedLater();
    assertEquals(files.unchanged(path, "k1"), false);
    files.checked(path, "k1");
    assertEquals(files.unchanged(path, "k1"), true);
    assertEquals(files.unchanged(path, "k2"), false);

    await Deno.writeTextFile(path, "longer");
    assertEquals(files.unchanged(path, "k1"), false);

    files.checked(path, "k1");
    await atomicWrite(path, "other", { mode: 0o600 });
    assertEquals(files.unchanged(path, "k1"), false);

    files.checked(path, "k1");
    await Deno.chmod(path, 0o644);
    assertEquals(files.unchanged(path, "k1"), false);

    files.checked(path, "k1");
    await Deno.remove(path);
    assertEquals(files.unchanged(path, "k1"), false);
  });
});

Deno.test("a file changed just before its check is not remembered", async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, "a.json");
    await atomicWrite(path, "one", { mode: 0o600 });
    const ctime = (await Deno.lstat(path)).ctime!.getTime();
    const files = new VerifiedFiles(() => ctime + TRUSTED_AGE_MS - 1);
    files.checked(path, "k1");
    assertEquals(files.unchanged(path, "k1"), false);
  });
});

Deno.test("a new check replaces the old one, and a failed one forgets it", async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, "a.json");
    await atomicWrite(path, "one", { mode: 0o600 });
    const files = checkedLater();
    files.checked(path, "k1");
    files.checked(path, "k2");
    assertEquals(files.unchanged(path, "k1"), false);
    assertEquals(files.unchanged(path, "k2"), true);
    await Deno.remove(path);
    files.checked(path, "k2");
    await atomicWrite(path, "one", { mode: 0o600 });
    assertEquals(files.unchanged(path, "k2"), false);
  });
});

Deno.test("directories and symlinks are never trusted", async () => {
  await withTempDir(async (dir) => {
    const file = join(dir, "a.json"), link = join(dir, "link.json"), sub = join(dir, "sub");
    await atomicWrite(file, "one", { mode: 0o600 });
    await Deno.symlink(file, link);
    await Deno.mkdir(sub);
    const files = checkedLater();
    for (const path of [link, sub]) {
      files.checked(path, "k1");
      assertEquals(files.unchanged(path, "k1"), false);
    }
  });
});

Deno.test("retain forgets every path it is not given", async () => {
  await withTempDir(async (dir) => {
    const a = join(dir, "a.json"), b = join(dir, "b.json");
    await atomicWrite(a, "one", { mode: 0o600 });
    await atomicWrite(b, "two", { mode: 0o600 });
    const files = checkedLater();
    files.checked(a, "k");
    files.checked(b, "k");
    files.retain(new Set([b]));
    assertEquals(files.unchanged(a, "k"), false);
    assertEquals(files.unchanged(b, "k"), true);
  });
});
