/**
 * The watch of the manifest dirs (lib/daemon/dir_watch.ts) on real dirs with the kernel's
 * inotify: files created, changed, renamed and removed are told, reads are not; a dir made late,
 * or removed and made again, is watched once it is there; a watch the kernel refuses is said once
 * and tried again. What is not told is shown by a sentinel file written after it: the kernel
 * tells events in order, so nothing told before the sentinel means nothing was.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { DirWatcher, type WatchFs } from "../../lib/daemon/dir_watch.ts";
import { LogCapture } from "../helpers/log_capture.ts";
import { withTempDir } from "../helpers/temp_dir.ts";

interface Watched {
  root: string;
  manifests: string;
  inactive: string;
  watcher: DirWatcher;
  told: string[];
  log: LogCapture;
  /** Waits (bounded) until a change naming `path` (of `kind`, if given) has been told; returns
   *  what was told up to it, and forgets it. */
  until(path: string, kind?: string): Promise<string[]>;
  /** What is told between `act` and a sentinel written into the inactive dir after it. */
  toldFor(act: () => Promise<unknown>): Promise<string[]>;
}

async function withWatched(
  opts: { make?: boolean; watchFs?: WatchFs },
  fn: (w: Watched) => Promise<void>,
) {
  await withTempDir(async (root) => {
    const manifests = join(root, "etc/kubernetes/manifests");
    const inactive = join(root, "etc/kubernetes/inactive-manifests");
    if (opts.make !== false) {
      for (const dir of [manifests, inactive]) await Deno.mkdir(dir, { recursive: true });
    }
    const told: string[] = [];
    const log = new LogCapture();
    const watcher = new DirWatcher({
      dirs: [manifests, inactive],
      onChange: (reason) => told.push(reason),
      log: log.logger,
      watchFs: opts.watchFs,
    });
    const until = async (path: string, kind?: string) => {
      const names = (r: string) =>
        kind === undefined ? r.endsWith(` ${path}`) : r === `${kind} ${path}`;
      for (let i = 0; i < 1_000 && !told.some(names); i++) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const upTo = told.findIndex(names);
      assert(upTo >= 0, `no change told for ${path}; told: ${told.join(", ")}`);
      return told.splice(0, upTo + 1);
    };
    let n = 0;
    const toldFor = async (act: () => Promise<unknown>) => {
      await act();
      const mark = await sentinel(inactive, String(n++));
      const upTo = await until(mark);
      assertEquals(upTo.pop(), `create ${mark}`);
      return upTo;
    };
    try {
      watcher.check();
      await fn({ root, manifests, inactive, watcher, told, log, until, toldFor });
    } finally {
      watcher.close();
    }
  });
}

Deno.test("dir watch: files created, changed, renamed or removed in either dir are told; reads are not", async () => {
  await withWatched({}, async ({ manifests, inactive, toldFor }) => {
    const file = join(inactive, "kube-system-a.json");
    assertEquals((await toldFor(() => Deno.writeTextFile(file, "{}")))[0], `create ${file}`);
    assert((await toldFor(() => Deno.writeTextFile(file, "{}"))).includes(`modify ${file}`));
    const active = join(manifests, "kube-system-a.json");
    assert((await toldFor(() => Deno.link(file, active))).includes(`create ${active}`));
    const renamed = join(manifests, "kube-system-b.json");
    const moved = await toldFor(() => Deno.rename(active, renamed));
    assert(moved.includes(`rename ${renamed}`), moved.join(", "));
    assertEquals(await toldFor(() => Deno.remove(renamed)), [`remove ${renamed}`]);

    // The pass reads both dirs and stats and reads every file in them.
    const reads = await toldFor(async () => {
      for (const dir of [manifests, inactive]) {
        for await (const entry of Deno.readDir(dir)) {
          await Deno.stat(join(dir, entry.name));
          await Deno.readTextFile(join(dir, entry.name));
        }
      }
    });
    assertEquals(reads, [], "nothing for the reads");
    const dotfile = join(manifests, ".kube-system-a.json.ckpt-tmp-1");
    assertEquals(await toldFor(() => Deno.writeTextFile(dotfile, "{}")), [], "nor dotfiles");
    const atomic = await toldFor(() => Deno.rename(dotfile, active));
    assert(atomic.includes(`rename ${active}`), atomic.join(", "));
  });
});

Deno.test("dir watch: files beside the dirs are not told, the dirs coming and going are", async () => {
  await withWatched({}, async ({ root, manifests, until, toldFor }) => {
    assertEquals(
      await toldFor(() => Deno.writeTextFile(join(root, "etc/kubernetes/x.conf"), "")),
      [],
    );
    // What the watch had not told when a dir came or went is lost with the watch it replaces
    // (the pass its change runs looks at it): the sentinel waits for the watch of now.
    await Deno.remove(manifests);
    await until(manifests, "remove");
    await Deno.mkdir(manifests);
    await until(manifests, "create");
    // Made again, it is watched again.
    const file = join(manifests, "kube-apiserver.yaml");
    assertEquals(await toldFor(() => Deno.writeTextFile(file, "")), [`create ${file}`]);
  });
});

Deno.test("dir watch: dirs that do not exist yet are watched once they are made", async () => {
  await withWatched({ make: false }, async ({ root, manifests, inactive, watcher, until }) => {
    assert(watcher.watching, "their nearest ancestor is watched");
    await Deno.mkdir(join(root, "etc"));
    await until(join(root, "etc"));
    await Deno.mkdir(manifests, { recursive: true });
    await until(join(root, "etc/kubernetes"));
    // The dir may have been made before the watch of its parent was: a check after each pass
    // sees it then.
    watcher.check();
    const file = join(manifests, "kube-apiserver.yaml");
    await Deno.writeTextFile(file, "x");
    await until(file, "create");
    await Deno.mkdir(inactive);
    await until(inactive);
    const copy = join(inactive, "kube-system-a.json");
    await Deno.writeTextFile(copy, "{}");
    await until(copy, "create");
  });
});

Deno.test("dir watch: a watch the kernel refuses is said once, tried at each check, and said again when it works", async () => {
  let refuse = true;
  const watchFs: WatchFs = (paths, options) => {
    // What Deno throws when the user's inotify instances are used up.
    if (refuse) throw new Error("Too many open files (os error 24)");
    return Deno.watchFs(paths, options);
  };
  await withWatched({ watchFs }, async ({ manifests, watcher, log, until }) => {
    assert(!watcher.watching);
    watcher.check();
    watcher.check();
    assertEquals(
      log.find("dir watch failed: changes in the manifest dirs are seen at the next poll")
        .map((l) => l.error),
      ["Too many open files (os error 24)"],
    );
    refuse = false;
    watcher.check();
    assert(watcher.watching);
    assertEquals(
      log.find("dir watch works again: changes in the manifest dirs run a pass").length,
      1,
    );
    const mark = await sentinel(manifests);
    assertEquals(await until(mark), [`create ${mark}`]);
  });
});

/** Writes an empty file named `sentinel` (plus `suffix`) into `dir`, so that its creation is all
 *  that is told of it; returns its path. */
async function sentinel(dir: string, suffix = ""): Promise<string> {
  const path = join(dir, `sentinel${suffix}`);
  await Deno.writeTextFile(path, "");
  return path;
}

Deno.test("dir watch: `quiet` holds while nothing is told, and moves with every change and every watch started or stopped", async () => {
  await withWatched({}, async ({ inactive, watcher, toldFor }) => {
    const file = join(inactive, "kube-system-a.json");
    await toldFor(() => Deno.writeTextFile(file, "{}"));
    const settled = watcher.quiet;
    assert(settled !== undefined);
    await new Promise((resolve) => setTimeout(resolve, 100));
    assertEquals(watcher.quiet, settled);
    // A read is not told; the sentinel after it is, and moves it.
    assertEquals(await toldFor(() => Deno.readTextFile(file)), []);
    const afterRead = watcher.quiet!;
    assert(afterRead > settled);
    await Deno.chmod(file, 0o600);
    await toldFor(() => Promise.resolve());
    assert(watcher.quiet! > afterRead);
    watcher.close();
    assertEquals(watcher.quiet, undefined);
  });
});

Deno.test("dir watch: an overflow of the kernel's queue runs a pass and moves `quiet`", async () => {
  // Overflowing inotify for real takes lowering fs.inotify.max_queued_events for the whole
  // machine; Deno tells an overflow as an event with no path and the `rescan` flag, which is
  // what this watch adds to the kernel's own events.
  let overflow: (() => void) | undefined;
  const watchFs: WatchFs = (paths, options) => {
    const real = Deno.watchFs(paths, options);
    const extra: Deno.FsEvent[] = [];
    let wake: (() => void) | undefined;
    overflow = () => {
      extra.push({ kind: "other", paths: [], flag: "rescan" });
      wake?.();
    };
    const iterator = real[Symbol.asyncIterator]();
    let pending: Promise<IteratorResult<Deno.FsEvent>> | undefined;
    return Object.assign(Object.create(real), {
      close: () => real.close(),
      [Symbol.asyncIterator]: () => ({
        async next(): Promise<IteratorResult<Deno.FsEvent>> {
          for (;;) {
            const queued = extra.shift();
            if (queued) return { value: queued, done: false };
            pending ??= iterator.next();
            const woken = new Promise<"woken">((resolve) => wake = () => resolve("woken"));
            const got = await Promise.race([pending, woken]);
            if (got === "woken") continue;
            pending = undefined;
            return got;
          }
        },
      }),
    });
  };
  await withWatched({ watchFs }, async ({ watcher, told, until, inactive }) => {
    await sentinel(inactive, "0");
    await until(join(inactive, "sentinel0"));
    const before = watcher.quiet!;
    overflow!();
    for (let i = 0; i < 400 && !told.includes("other rescan"); i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assertEquals(told, ["other rescan"]);
    assert(watcher.quiet! > before);
  });
});
