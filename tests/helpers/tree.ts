/** Everything under a directory (symlinks not followed), for comparing file trees in tests. */

export interface Entry {
  /** "other": a socket, fifo or device, whose content is not read. */
  type: "file" | "dir" | "symlink" | "other";
  mode: number;
  uid: number;
  gid: number;
  content?: string;
  /** With `stamps`: what a rewrite changes even when the content is the same. */
  mtimeMs?: number;
  ino?: number;
}

/** Every entry under `dir`, by path relative to it, sorted. */
export async function tree(
  dir: string,
  opts: { stamps?: boolean } = {},
  prefix = "",
): Promise<Record<string, Entry>> {
  const out: Record<string, Entry> = {};
  const entries: Deno.DirEntry[] = [];
  for await (const entry of Deno.readDir(dir)) entries.push(entry);
  for (const entry of entries.sort((a, b) => a.name < b.name ? -1 : 1)) {
    const path = `${dir}/${entry.name}`, rel = `${prefix}${entry.name}`;
    const info = await Deno.lstat(path);
    const type = info.isSymlink
      ? "symlink"
      : info.isDirectory
      ? "dir"
      : info.isFile
      ? "file"
      : "other";
    out[rel] = {
      type,
      mode: (info.mode ?? 0) & 0o7777,
      uid: info.uid ?? -1,
      gid: info.gid ?? -1,
      ...(type === "file" ? { content: await Deno.readTextFile(path) } : {}),
      ...(opts.stamps ? { mtimeMs: info.mtime?.getTime() ?? 0, ino: info.ino ?? 0 } : {}),
    };
    if (type === "dir") Object.assign(out, await tree(path, opts, `${rel}/`));
  }
  return out;
}

/**
 * The manifests of a manifest directory as the kubelet reads it: the entries `tree` finds but
 * those under a dot-name, such as the inactive dir's `.versions` (docs/design.md#versions).
 */
export async function manifestTree(dir: string): Promise<Record<string, Entry>> {
  return Object.fromEntries(
    Object.entries(await tree(dir)).filter(([path]) => !path.startsWith(".")),
  );
}
