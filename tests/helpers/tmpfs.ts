/**
 * Real small file systems for tests of full and read-only disks: a tmpfs mounted on a fresh temp
 * directory, which can be filled to the last byte, grown, shrunk and remounted read-only. Mounting
 * needs root (CI runs as root); where it is not permitted, `TMPFS_UNAVAILABLE` says why and the
 * tests that need it are ignored with that reason printed, never passed.
 */
import { join } from "node:path";

async function run(command: string, ...args: string[]): Promise<{ ok: boolean; error: string }> {
  const out = await new Deno.Command(command, { args, stdout: "null", stderr: "piped" }).output()
    .catch((e: Error) => ({ success: false, stderr: new TextEncoder().encode(e.message) }));
  return { ok: out.success, error: new TextDecoder().decode(out.stderr).trim() };
}

async function mount(dir: string, options: string): Promise<void> {
  const result = await run("mount", "-t", "tmpfs", "-o", options, "tmpfs", dir);
  if (!result.ok) throw new Error(`mount tmpfs (${options}) on ${dir}: ${result.error}`);
}

async function umount(dir: string): Promise<void> {
  const result = await run("umount", dir);
  if (!result.ok) throw new Error(`umount ${dir}: ${result.error}`);
}

/** Why tmpfs mounts cannot be made here, or undefined when they can. */
async function probe(): Promise<string | undefined> {
  if (Deno.build.os !== "linux") return "tmpfs mounts need Linux";
  const dir = await Deno.makeTempDir({ prefix: "ckpt-tmpfs-probe-" });
  try {
    await mount(dir, "size=64k");
    await umount(dir);
    return undefined;
  } catch (e) {
    return (e as Error).message;
  } finally {
    await Deno.remove(dir).catch(() => {});
  }
}

export const TMPFS_UNAVAILABLE = await probe();
if (TMPFS_UNAVAILABLE) {
  console.error(`tmpfs tests are skipped: ${TMPFS_UNAVAILABLE}`);
}

export class Tmpfs {
  private constructor(readonly dir: string) {}

  static async mount(sizeBytes: number): Promise<Tmpfs> {
    const dir = await Deno.makeTempDir({ prefix: "ckpt-tmpfs-" });
    try {
      await mount(dir, `size=${sizeBytes},mode=0755`);
    } catch (e) {
      await Deno.remove(dir).catch(() => {});
      throw e;
    }
    return new Tmpfs(dir);
  }

  path(...parts: string[]): string {
    return join(this.dir, ...parts);
  }

  /** Changes the size; shrinking below what is used fails, as it does on a real node. */
  async resize(sizeBytes: number): Promise<void> {
    const result = await run("mount", "-o", `remount,size=${sizeBytes}`, this.dir);
    if (!result.ok) throw new Error(`resize ${this.dir}: ${result.error}`);
  }

  async readOnly(readOnly: boolean): Promise<void> {
    const result = await run("mount", "-o", `remount,${readOnly ? "ro" : "rw"}`, this.dir);
    if (!result.ok) throw new Error(`remount ${this.dir}: ${result.error}`);
  }

  /**
   * Fills the file system to the last byte with a dot-named file (the kubelet ignores such
   * files in its static-pod dir); returns its path, so the space can be given back by deleting
   * it. tmpfs counts pages, so the file is written in pages and then byte by byte.
   */
  async fill(name = ".ballast"): Promise<string> {
    const path = this.path(name);
    const file = await Deno.open(path, { create: true, append: true });
    try {
      for (const size of [1 << 20, 4096, 1]) {
        const chunk = new Uint8Array(size);
        for (;;) {
          try {
            await file.write(chunk);
          } catch (e) {
            if ((e as { code?: string }).code === "ENOSPC") break;
            throw e;
          }
        }
      }
    } finally {
      file.close();
    }
    return path;
  }

  /** Free bytes, as df shows them. */
  async freeBytes(): Promise<number> {
    const out = await new Deno.Command("df", { args: ["--output=avail", "-B1", this.dir] })
      .output();
    return Number(new TextDecoder().decode(out.stdout).trim().split("\n").pop());
  }

  async unmount(): Promise<void> {
    await umount(this.dir);
    await Deno.remove(this.dir);
  }
}

/** A tmpfs of `sizeBytes` for one test, unmounted whatever happens. */
export async function withTmpfs<T>(sizeBytes: number, fn: (fs: Tmpfs) => Promise<T>): Promise<T> {
  const fs = await Tmpfs.mount(sizeBytes);
  try {
    return await fn(fs);
  } finally {
    await fs.readOnly(false).catch(() => {});
    await fs.unmount();
  }
}
