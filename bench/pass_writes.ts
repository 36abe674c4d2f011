/**
 * Two independent ways for bench/pass_bench.ts to see that a pass wrote nothing under a node's
 * root: a listing of every file and directory with its identity and times (a write, rename,
 * unlink, chmod or chown changes an mtime or a ctime), and a strace log of the agent process,
 * in which every writing system call naming a path or a file descriptor under the root counts.
 */
import { join } from "node:path";
import { statIdentity } from "../lib/disk/verified_files.ts";

/** Path → identity (inode, size, mode, owner, mtime, ctime) of everything under `root`. */
export async function listTree(root: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const visit = async (dir: string) => {
    for await (const entry of Deno.readDir(dir)) {
      const path = join(dir, entry.name);
      const info = await Deno.lstat(path);
      out.set(path, statIdentity(info));
      if (info.isDirectory) await visit(path);
    }
  };
  await visit(root);
  return out;
}

/** Paths created, removed or changed between two listings. */
export function treeChanges(before: Map<string, string>, after: Map<string, string>): string[] {
  const changed: string[] = [];
  for (const [path, meta] of after) {
    if (before.get(path) !== meta) {
      changed.push(before.has(path) ? `changed ${path}` : `new ${path}`);
    }
  }
  for (const path of before.keys()) if (!after.has(path)) changed.push(`gone ${path}`);
  return changed;
}

/** System calls that change a file system; `openat` counts only when it opens for writing. */
export const WRITING_SYSCALLS = [
  "openat",
  "creat",
  "write",
  "pwrite64",
  "writev",
  "pwritev",
  "pwritev2",
  "truncate",
  "ftruncate",
  "fallocate",
  "rename",
  "renameat",
  "renameat2",
  "link",
  "linkat",
  "symlink",
  "symlinkat",
  "unlink",
  "unlinkat",
  "mkdir",
  "mkdirat",
  "rmdir",
  "chmod",
  "fchmod",
  "fchmodat",
  "chown",
  "fchown",
  "fchownat",
  "lchown",
  "utimensat",
  "fsync",
  "fdatasync",
];

/** The strace command line that logs WRITING_SYSCALLS of a process tree, with fd paths. */
export function straceArgs(logFile: string): string[] {
  return ["-f", "-y", "-qq", "-o", logFile, "-e", `trace=${WRITING_SYSCALLS.join(",")}`];
}

const CALL = /^\d+\s+(\w+)\((.*)$/;
const WRITE_FLAGS = /O_WRONLY|O_RDWR|O_CREAT|O_TRUNC/;

/**
 * The writing calls under `root` in an strace log, between the line that opens `fromMark` (or
 * the start) and the line that opens `toMark` (see `mark` in pass_protocol.ts). Lines split by
 * strace across threads (`<unfinished ...>`) are counted at their start, which names the file.
 */
export function writesBetween(
  log: string,
  root: string,
  fromMark: string | undefined,
  toMark: string,
): string[] {
  const writes: string[] = [];
  let inside = fromMark === undefined;
  for (const line of log.split("\n")) {
    if (fromMark !== undefined && line.includes(`"${fromMark}"`)) {
      inside = true;
      continue;
    }
    if (line.includes(`"${toMark}"`)) break;
    const call = CALL.exec(line);
    if (!inside || !call) continue;
    const [, name, args] = call;
    // A path, or a descriptor strace annotates with its path.
    const underRoot = args.includes(`"${root}/`) || args.includes(`<${root}/`);
    if (!underRoot) continue;
    if (name === "openat" && !WRITE_FLAGS.test(args)) continue;
    writes.push(line);
  }
  return writes;
}
