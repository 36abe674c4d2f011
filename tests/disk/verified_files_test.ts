/** Remembered file checks: trusted only while lstat shows the file as it was, never when racy. */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { join } from "node:path";
import { atomicWrite } from "../../lib/disk/atomic_write.ts";
import {
  contentDigest,
  TreeStamp,
  TRUSTED_AGE_MS,
  VerifiedFiles,
} from "../../lib/disk/verified_files.ts";
import { withTempDir } from "../helpers/temp_dir.ts";
import { untilSettled } from "../helpers/until.ts";

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

/** A tree: a file at its top, a directory with a file below. */
function makeTree(root: string) {
  Deno.mkdirSync(join(root, "sub"), { recursive: true });
  Deno.writeTextFileSync(join(root, "a"), "a");
  Deno.writeTextFileSync(join(root, "sub", "b"), "b");
}

Deno.test("a tree stamp holds while nothing in the trees changes, and an absent root while it stays absent", async () => {
  await withTempDir(async (dir) => {
    const changes: [string, (root: string, absent: string) => void][] = [
      ["nothing", () => {}],
      ["a file rewritten, its mtime set back", (root) => {
        const { mtime } = Deno.lstatSync(join(root, "sub", "b"));
        Deno.writeTextFileSync(join(root, "sub", "b"), "c");
        Deno.utimeSync(join(root, "sub", "b"), mtime!, mtime!);
      }],
      ["a file chmodded", (root) => Deno.chmodSync(join(root, "a"), 0o600)],
      ["a file removed", (root) => Deno.removeSync(join(root, "a"))],
      ["a file added deep down", (root) => Deno.writeTextFileSync(join(root, "sub", "c"), "")],
      ["a directory removed", (root) => Deno.removeSync(join(root, "sub"), { recursive: true })],
      ["the absent root made", (_, absent) => Deno.mkdirSync(absent)],
      ["a root removed", (root) => Deno.removeSync(root, { recursive: true })],
    ];
    const roots = changes.map((_, i) => [join(dir, `root${i}`), join(dir, `absent${i}`)]);
    for (const [root] of roots) makeTree(root);
    // Deno reports ctime in whole seconds: a stamp is only taken of a tree that old.
    for (const [root] of roots) await untilSettled(join(root, "sub", "b"));
    const stamps = roots.map((paths) => TreeStamp.take(paths, Date.now())!);
    changes.forEach(([, change], i) => change(roots[i][0], roots[i][1]));
    assertEquals(
      changes.map(([what], i) => [what, stamps[i].unchanged()]),
      changes.map(([what]) => [what, what === "nothing"]),
    );
  });
});

Deno.test("a tree with an entry changed just before is not stamped", async () => {
  await withTempDir((dir) => {
    makeTree(dir);
    const ctime = Deno.lstatSync(join(dir, "sub", "b")).ctime!.getTime();
    assertEquals(TreeStamp.take([dir], ctime + TRUSTED_AGE_MS - 1), undefined);
    assertEquals(TreeStamp.take([dir], ctime + 10 * TRUSTED_AGE_MS)?.unchanged(), true);
    return Promise.resolve();
  });
});

Deno.test("a key digested once stands for the key itself", async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, "a.json");
    await atomicWrite(path, "one", { mode: 0o600 });
    const files = checkedLater();
    files.checked(path, "k1");
    assertEquals(files.unchanged(path, { digest: contentDigest("k1") }), true);
    assertEquals(files.held(path, { digest: contentDigest("k2") }), false);
    files.checked(path, { digest: contentDigest(["owner", new Uint8Array([1])]) });
    assertEquals(files.unchanged(path, ["owner", new Uint8Array([1])]), true);
    assertEquals(files.held(path, ["owner", new Uint8Array([2])]), false);
  });
});
