/**
 * Tells the daemon when a file in the static-pod dir or the inactive dir is created, changed or
 * removed (an operator, a kubeadm upgrade or another tool touching a manifest), so that a pass
 * runs then and not at the next poll.
 *
 * inotify watches an inode, not a path: a dir removed and made again is a new one, and a dir
 * that does not exist cannot be watched at all. So each dir's parent is watched too (or its
 * nearest ancestor that exists), which sees the dir come and go, and the watch is set up again
 * whenever a watched path is not the inode it was (`check`, after each pass and on such an
 * event). Reading a dir or a file raises nothing; a close after writing does (`access`), and is
 * ignored, since its write already raised `modify`; so are dotfiles, which no pass reads.
 *
 * A watch that cannot be set up or fails (the kernel's inotify limits) leaves the dirs to the
 * poll, said once at warn, and is tried again at each check.
 *
 * `quiet` lets a pass know the dirs are as its last look found them: it changes with every event
 * (any kind but `access`, in the dirs or their ancestors, dotfiles too, and an overflow of the
 * kernel's queue, which Deno tells as an event with no path and the `rescan` flag) and whenever a
 * watch starts or stops.
 */
import { basename, dirname } from "node:path";
import type { Logger } from "../util/log.ts";

/** Deno.watchFs, which a test may replace to make the watch fail as the kernel would. */
export type WatchFs = (paths: string[], options: { recursive: boolean }) => Deno.FsWatcher;

export interface DirWatchOptions {
  /** Absolute paths of the dirs whose files matter. */
  dirs: readonly string[];
  /** Told of each change, with a few words for the log (`create /etc/kubernetes/manifests/x`). */
  onChange: (reason: string) => void;
  log: Logger;
  watchFs?: WatchFs;
}

/** The dir itself when it exists, and its parent or nearest ancestor that exists. */
function watchedPaths(dir: string): string[] {
  const paths: string[] = [];
  for (let path = dir;; path = dirname(path)) {
    if (isDir(path)) {
      paths.push(path);
      if (path !== dir || path === dirname(path)) return paths;
    }
    if (path === dirname(path)) return paths;
  }
}

function isDir(path: string): boolean {
  try {
    return Deno.statSync(path).isDirectory;
  } catch {
    return false;
  }
}

/** Each path with its inode, which changes when the path is made again. */
function identity(paths: readonly string[]): string {
  return paths.map((path) => {
    try {
      const info = Deno.statSync(path);
      return `${path} ${info.dev}:${info.ino}`;
    } catch {
      return `${path} absent`;
    }
  }).join("\n");
}

export class DirWatcher {
  readonly #dirs: readonly string[];
  readonly #onChange: (reason: string) => void;
  readonly #log: Logger;
  readonly #watchFs: WatchFs;
  #watcher?: Deno.FsWatcher;
  /** What the watcher watches, as `identity` says it; empty when nothing is watched. */
  #watching = "";
  #failing = false;
  #closed = false;
  /** Counts the events and the watches started and stopped: see `quiet`. */
  #generation = 0;

  constructor(opts: DirWatchOptions) {
    this.#dirs = opts.dirs;
    this.#onChange = opts.onChange;
    this.#log = opts.log;
    this.#watchFs = opts.watchFs ?? Deno.watchFs;
  }

  /** Whether the dirs are watched now (false: left to the poll). */
  get watching(): boolean {
    return this.#watcher !== undefined;
  }

  /**
   * The same number at two moments only if the dirs were watched all along between them and no
   * event came; undefined while they are not watched. An event is told a little after its
   * change: a change made just before a pass may go unseen by it, and its event runs the next.
   */
  get quiet(): number | undefined {
    return this.#watcher === undefined ? undefined : this.#generation;
  }

  /** Watches the dirs as they are now, if that is not what is watched: a few stats. */
  check() {
    if (this.#closed) return;
    const paths = [...new Set(this.#dirs.flatMap(watchedPaths))].sort();
    const now = identity(paths);
    if (this.#watcher && now === this.#watching) return;
    // The new watch before the old one ends: a change in between is told by one of them. What
    // the old one had not told yet is lost, but it happened before this check, and the pass that
    // follows looks at it.
    let watcher: Deno.FsWatcher;
    try {
      watcher = this.#watchFs(paths, { recursive: false });
    } catch (e) {
      return this.#failed(e as Error);
    }
    this.#stopWatching();
    this.#generation++;
    this.#watcher = watcher;
    this.#watching = now;
    if (this.#failing) {
      this.#failing = false;
      this.#log.info("dir watch works again: changes in the manifest dirs run a pass", {
        dirs: this.#dirs,
      });
    }
    void this.#consume(watcher);
  }

  close() {
    this.#closed = true;
    this.#stopWatching();
  }

  async #consume(watcher: Deno.FsWatcher) {
    try {
      for await (const event of watcher) this.#event(event);
    } catch (e) {
      if (watcher === this.#watcher) this.#failed(e as Error);
      return;
    }
    // Ended without being closed here: nothing is watched until the next check.
    if (watcher === this.#watcher) this.#stopWatching();
  }

  #event(event: Deno.FsEvent) {
    if (event.kind === "access") return;
    this.#generation++;
    // The kernel's queue overflowed: what changed is not known, so a pass looks at everything.
    if (event.paths.length === 0) this.#onChange(`${event.kind} ${event.flag ?? "(no path)"}`);
    let changed: string | undefined;
    let moved = false;
    for (const path of event.paths) {
      const inDir = this.#dirs.includes(dirname(path));
      // Dotfiles (the agent's own temp files among them) are not manifests to the kubelet or
      // to a pass (lib/disk/manifests.ts): a change to one changes nothing a pass decides.
      if (inDir && !basename(path).startsWith(".")) changed ??= path;
      if (this.#dirs.some((dir) => dir === path || dir.startsWith(`${path}/`))) {
        moved = true;
        changed ??= path;
      }
    }
    // A dir (or an ancestor) came or went: watch what is there now, and look at what it holds.
    if (moved) this.check();
    if (changed !== undefined) this.#onChange(`${event.kind} ${changed}`);
  }

  #failed(error: Error) {
    this.#stopWatching();
    if (this.#failing) return;
    this.#failing = true;
    this.#log.warn("dir watch failed: changes in the manifest dirs are seen at the next poll", {
      dirs: this.#dirs,
      error: error.message,
    });
  }

  #stopWatching() {
    const watcher = this.#watcher;
    this.#generation++;
    this.#watcher = undefined;
    this.#watching = "";
    try {
      watcher?.close();
    } catch {
      // Already closed by the runtime when its watch ended.
    }
  }
}
