/** The one write path: atomic replacement, exact modes and owners, skip when unchanged, sweeps. */
import { deepStrictEqual as assertEquals, ok as assert, rejects } from "node:assert/strict";
import { umask } from "node:process";
import { basename, dirname, join } from "node:path";
import {
  atomicLink,
  atomicWrite,
  removeDurably,
  sweepTempFiles,
  syncDir,
  TEMP_MARKER,
  tempPathFor,
} from "../../lib/disk/atomic_write.ts";
import { TMPFS_UNAVAILABLE, withTmpfs } from "../helpers/tmpfs.ts";

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir();
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function names(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const entry of Deno.readDir(dir)) out.push(entry.name);
  return out.sort();
}

/** chown to arbitrary ids needs root; the tests run as root, elsewhere these are skipped. */
const asRoot = (name: string, fn: () => Promise<void>) =>
  Deno.test({ name, ignore: Deno.uid() !== 0, fn });

async function modeOf(path: string): Promise<number> {
  return (await Deno.stat(path)).mode! & 0o7777;
}

Deno.test("a new file gets its content and exactly the requested mode, whatever the umask", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "a.json");
    const old = umask(0o077);
    try {
      assertEquals(await atomicWrite(path, "hello", { mode: 0o644 }), "written");
    } finally {
      umask(old);
    }
    assertEquals(await Deno.readTextFile(path), "hello");
    assertEquals(await modeOf(path), 0o644);
    assertEquals(await names(dir), ["a.json"]);
  });
});

Deno.test("bytes and strings are both accepted, including empty content", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "b");
    assertEquals(await atomicWrite(path, new Uint8Array([0, 1, 255]), { mode: 0o600 }), "written");
    assertEquals(await Deno.readFile(path), new Uint8Array([0, 1, 255]));
    assertEquals(await atomicWrite(path, "", { mode: 0o600 }), "written");
    assertEquals(await Deno.readFile(path), new Uint8Array());
  });
});

Deno.test("identical content, mode and owner: unchanged, and the file is not replaced", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "a.json");
    await atomicWrite(path, "same", { mode: 0o600 });
    const before = await Deno.stat(path);
    assertEquals(await atomicWrite(path, "same", { mode: 0o600 }), "unchanged");
    assertEquals(
      await atomicWrite(path, new TextEncoder().encode("same"), { mode: 0o600 }),
      "unchanged",
    );
    assertEquals((await Deno.stat(path)).ino, before.ino);
  });
});

Deno.test("a different content, length or mode replaces the file", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "a.json");
    await atomicWrite(path, "abc", { mode: 0o600 });
    const first = (await Deno.stat(path)).ino;
    // A second name keeps the first inode allocated: freed, its number may be given to a later
    // temp file, and the file would look rewritten in place.
    await Deno.link(path, join(dir, "first"));
    assertEquals(await atomicWrite(path, "abd", { mode: 0o600 }), "written");
    assertEquals(await Deno.readTextFile(path), "abd");
    assertEquals(await atomicWrite(path, "abdx", { mode: 0o600 }), "written");
    assertEquals(await atomicWrite(path, "abdx", { mode: 0o640 }), "written");
    assertEquals(await modeOf(path), 0o640);
    assert((await Deno.stat(path)).ino !== first, "replaced by rename, not rewritten in place");
  });
});

Deno.test("a file someone widened is rewritten with its mode restored", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "secret");
    await atomicWrite(path, "s3cr3t", { mode: 0o600 });
    await Deno.chmod(path, 0o644);
    assertEquals(await atomicWrite(path, "s3cr3t", { mode: 0o600 }), "written");
    assertEquals(await modeOf(path), 0o600);
  });
});

Deno.test("a symlink at the target is replaced by a file, its destination left alone", async () => {
  await withDir(async (dir) => {
    const elsewhere = join(dir, "elsewhere");
    await Deno.writeTextFile(elsewhere, "same");
    await Deno.chmod(elsewhere, 0o600);
    const path = join(dir, "link");
    await Deno.symlink(elsewhere, path);
    assertEquals(await atomicWrite(path, "same", { mode: 0o600 }), "written");
    assert((await Deno.lstat(path)).isFile);
    assertEquals(await Deno.readTextFile(elsewhere), "same");
  });
});

asRoot("owner is set when asked, and a different owner or group means a rewrite", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "owned");
    assertEquals(await atomicWrite(path, "x", { mode: 0o600, uid: 1234, gid: 5678 }), "written");
    const info = await Deno.stat(path);
    assertEquals([info.uid, info.gid], [1234, 5678]);
    assertEquals(await atomicWrite(path, "x", { mode: 0o600, uid: 1234, gid: 5678 }), "unchanged");
    assertEquals(await atomicWrite(path, "x", { mode: 0o600, uid: 1234, gid: 1 }), "written");
    assertEquals((await Deno.stat(path)).gid, 1);
    // Owner not asked for: the content and mode decide.
    assertEquals(await atomicWrite(path, "x", { mode: 0o600 }), "unchanged");
  });
});

asRoot("an owner without a group uses the owner id for both, and is then unchanged", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "owned");
    await atomicWrite(path, "x", { mode: 0o600, uid: 4321 });
    const info = await Deno.stat(path);
    assertEquals([info.uid, info.gid], [4321, 4321]);
    assertEquals(await atomicWrite(path, "x", { mode: 0o600, uid: 4321 }), "unchanged");
  });
});

asRoot("the final mode survives a chown, even with set-id bits", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "tool");
    await atomicWrite(path, "x", { mode: 0o6750, uid: 1234, gid: 5678 });
    assertEquals(await modeOf(path), 0o6750);
  });
});

Deno.test("a failed rename leaves the target as it was and no temp file behind", async () => {
  await withDir(async (dir) => {
    // Renaming a file over a non-empty directory fails after the temp file is written.
    const path = join(dir, "target");
    await Deno.mkdir(path);
    await Deno.writeTextFile(join(path, "inside"), "keep");
    await rejects(atomicWrite(path, "new", { mode: 0o600 }));
    assertEquals(await names(dir), ["target"]);
    assertEquals(await Deno.readTextFile(join(path, "inside")), "keep");
  });
});

Deno.test(
  "a full file system: the write fails naming the path, the old content stays, no temp file",
  { ignore: TMPFS_UNAVAILABLE !== undefined },
  async () => {
    await withTmpfs(64 * 1024, async (fs) => {
      const path = fs.path("manifest.json");
      await atomicWrite(path, "old", { mode: 0o600 });
      const ballast = await fs.fill();
      const error = await atomicWrite(path, "new".repeat(4096), { mode: 0o600 }).then(
        () => undefined,
        (e: Error & { code?: string }) => e,
      );
      assertEquals(error?.code, "ENOSPC");
      assertEquals(
        error?.message,
        `No space left on device (os error 28): write '${path}'`,
      );
      assertEquals(await names(fs.dir), [".ballast", "manifest.json"]);
      assertEquals(await Deno.readTextFile(path), "old");
      // A new file is not left empty either.
      await rejects(atomicWrite(fs.path("new.json"), "x".repeat(8192), { mode: 0o600 }));
      assertEquals(await names(fs.dir), [".ballast", "manifest.json"]);
      // Space back: the same write goes through.
      await Deno.remove(ballast);
      assertEquals(await atomicWrite(path, "new".repeat(4096), { mode: 0o600 }), "written");
    });
  },
);

Deno.test(
  "atomicLink: the same file under a second name, even on a full file system",
  { ignore: TMPFS_UNAVAILABLE !== undefined },
  async () => {
    await withTmpfs(64 * 1024, async (fs) => {
      const source = fs.path("inactive.json"), target = fs.path("active.json");
      await atomicWrite(source, "checkpoint", { mode: 0o600 });
      await atomicWrite(target, "older", { mode: 0o600 });
      await fs.fill();
      assertEquals(await fs.freeBytes(), 0);
      assertEquals(await atomicLink(source, target, { mode: 0o600 }), "linked");
      const [a, b] = [await Deno.stat(source), await Deno.stat(target)];
      assertEquals([b.ino, b.nlink, await Deno.readTextFile(target)], [a.ino, 2, "checkpoint"]);
      assertEquals(await names(fs.dir), [".ballast", "active.json", "inactive.json"]);
      // A new name too.
      assertEquals(await atomicLink(source, fs.path("new.json"), { mode: 0o600 }), "linked");
      assertEquals((await Deno.stat(fs.path("new.json"))).ino, a.ino);
    });
  },
);

/** The names `work` makes appear in `dir`, as inotify tells them, in order. */
async function namesSeen(dir: string, work: () => Promise<void>): Promise<string[]> {
  const watcher = Deno.watchFs(dir);
  const seen: string[] = [];
  try {
    await work();
    // Told after everything `work` did: once its event is in, so are those before it.
    const end = join(dir, "zz-end");
    await Deno.writeTextFile(end, "");
    for await (const event of watcher) {
      seen.push(...event.paths.map((path) => basename(path)));
      if (event.paths.includes(end)) break;
    }
    await Deno.remove(end);
  } finally {
    watcher.close();
  }
  return [...new Set(seen)].filter((name) => name !== "zz-end");
}

Deno.test("atomicLink: a new name is linked straight to it, no temp name made", async () => {
  await withDir(async (dir) => {
    const source = join(dir, "in", "manifest.json"), target = join(dir, "out", "manifest.json");
    await Deno.mkdir(dirname(source));
    await Deno.mkdir(dirname(target));
    await atomicWrite(source, "checkpoint", { mode: 0o600 });
    const seen = await namesSeen(dirname(target), async () => {
      assertEquals(await atomicLink(source, target, { mode: 0o600 }), "linked");
    });
    assertEquals(seen, ["manifest.json"]);
    assertEquals((await Deno.stat(target)).ino, (await Deno.stat(source)).ino);
    // Over an existing name: a temp link renamed over it, the old file replaced at once.
    await atomicWrite(source, "newer", { mode: 0o600 });
    const replaced = await namesSeen(dirname(target), async () => {
      assertEquals(await atomicLink(source, target, { mode: 0o600 }), "linked");
    });
    assert(replaced.some((name) => name.includes(TEMP_MARKER)), replaced.join(" "));
    assertEquals(await Deno.readTextFile(target), "newer");
    assertEquals(await names(dirname(target)), ["manifest.json"]);
  });
});

Deno.test("atomicLink: a name that is already a link to the file is left as it is, no temp link", async () => {
  await withDir(async (dir) => {
    const source = join(dir, "source"), target = join(dir, "target");
    await atomicWrite(source, "checkpoint", { mode: 0o600 });
    assertEquals(await atomicLink(source, target, { mode: 0o600 }), "linked");
    assertEquals(await atomicLink(source, target, { mode: 0o600 }), "linked");
    assertEquals(await names(dir), ["source", "target"]);
    assertEquals((await Deno.stat(source)).nlink, 2);
  });
});

Deno.test("atomicLink: a failed rename leaves the target as it was and no temp link", async () => {
  await withDir(async (dir) => {
    const source = join(dir, "source"), target = join(dir, "target");
    await Deno.writeTextFile(source, "x");
    await Deno.mkdir(join(target, "inside"), { recursive: true });
    await rejects(atomicLink(source, target, { mode: 0o600 }));
    assertEquals(await names(dir), ["source", "target"]);
    assertEquals((await Deno.stat(source)).nlink, 1);
  });
});

Deno.test("a missing directory is an error, not a created path", async () => {
  await withDir(async (dir) => {
    await rejects(
      atomicWrite(join(dir, "missing", "a"), "x", { mode: 0o600 }),
      Deno.errors.NotFound,
    );
    assertEquals(await names(dir), []);
  });
});

Deno.test("temp paths: same directory, leading dot, our marker, unique, at most 255 bytes", () => {
  const path = "/var/lib/ckpt-agent/status/kube-system_kube-apiserver.json";
  const a = tempPathFor(path), b = tempPathFor(path);
  assert(a !== b);
  for (const temp of [a, b]) {
    assertEquals(dirname(temp), dirname(path));
    assert(basename(temp).startsWith(".kube-system_kube-apiserver.json"));
    assert(basename(temp).includes(TEMP_MARKER));
  }
  const longName = "é".repeat(127) + "x"; // 255 bytes, the longest name Linux allows
  const temp = basename(tempPathFor(join("/d", longName)));
  assert(new TextEncoder().encode(temp).length <= 255, temp);
  assert(temp.startsWith(".é") && temp.includes(TEMP_MARKER));
  assert(!temp.includes("\ufffd"), "truncated on a character boundary");
});

Deno.test("a file with the longest allowed name can be written", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "n".repeat(255));
    assertEquals(await atomicWrite(path, "x", { mode: 0o600 }), "written");
    assertEquals(await Deno.readTextFile(path), "x");
    assertEquals(await names(dir), ["n".repeat(255)]);
  });
});

Deno.test("sweep removes only our temp files and reports their names", async () => {
  await withDir(async (dir) => {
    const ours = [basename(tempPathFor(join(dir, "a.json"))), `.b.json${TEMP_MARKER}x`];
    const theirs = [".hidden", `b.json${TEMP_MARKER}1`, "a.json"];
    for (const name of [...ours, ...theirs]) await Deno.writeTextFile(join(dir, name), "x");
    await Deno.mkdir(join(dir, `.dir${TEMP_MARKER}1`));
    assertEquals((await sweepTempFiles(dir)).sort(), ours.sort());
    assertEquals(await names(dir), [...theirs, `.dir${TEMP_MARKER}1`].sort());
    assertEquals(await sweepTempFiles(dir), []);
  });
});

Deno.test("sweeping a missing directory finds nothing", async () => {
  await withDir(async (dir) => {
    assertEquals(await sweepTempFiles(join(dir, "missing")), []);
  });
});

Deno.test("removeDurably: removed, then absent", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "gone");
    await Deno.writeTextFile(path, "x");
    assertEquals(await removeDurably(path), "removed");
    assertEquals(await removeDurably(path), "absent");
    assertEquals(await names(dir), []);
  });
});

Deno.test("syncDir works on a directory and fails on a missing one", async () => {
  await withDir(async (dir) => {
    await syncDir(dir);
    await rejects(syncDir(join(dir, "missing")), Deno.errors.NotFound);
  });
});
