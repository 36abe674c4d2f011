/**
 * Shared by the packaging tests: the repository's packaging files, external tools run as
 * subprocesses, a staging directory with a stand-in binary, and a full listing of a directory
 * tree (kind, mode, content hash) to compare installs byte for byte.
 */
import { createHash } from "node:crypto";
import { join } from "node:path";
import { MAN_PAGE } from "../../scripts/man_page.ts";

export const REPO = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");
export const INSTALL_SH = `${REPO}/install.sh`;
export const UNIT_FILE = `${REPO}/systemd/ckpt-agent.service`;
export const CONFIG_FILE = `${REPO}/systemd/config.yaml`;
export const ALERT_RULES = `${REPO}/prometheus/ckpt-agent.rules.yml`;
export const MAN_PAGE_FILE = MAN_PAGE.pathname;

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs a program to completion, in the environment of the tests plus `env`; a missing program is
 * a failure naming what to install.
 */
export async function run(
  program: string,
  args: string[],
  options: { cwd?: string; env?: Record<string, string> } = {},
): Promise<RunResult> {
  let out: Deno.CommandOutput;
  try {
    out = await new Deno.Command(program, {
      args,
      cwd: options.cwd,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      env: {
        LC_ALL: "C",
        NO_COLOR: "1",
        SYSTEMD_COLORS: "0",
        SYSTEMD_PAGER: "",
        ...options.env,
      },
    }).output();
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) {
      throw new Error(`${program} is not installed (CI installs it with apt)`);
    }
    throw e;
  }
  const decode = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: decode(out.stdout), stderr: decode(out.stderr) };
}

export function installSh(args: string[], options: { cwd?: string } = {}): Promise<RunResult> {
  return run(INSTALL_SH, args, options);
}

/** A temp directory holding `bin`, an executable stand-in for the compiled agent. */
export interface Staging {
  dir: string;
  /** The staging root given to `install.sh --root`; not created beforehand. */
  root: string;
  binary: string;
}

/**
 * The stand-in runs the agent from source, the way the compiled binary would run it, since
 * `deno compile` cannot fetch its runtime here.
 */
async function writeStandIn(path: string): Promise<void> {
  await Deno.writeTextFile(
    path,
    `#!/bin/sh\nexec '${Deno.execPath()}' run --allow-all --quiet '${REPO}/main.ts' "$@"\n`,
  );
  await Deno.chmod(path, 0o755);
}

export async function withStaging(fn: (s: Staging) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-packaging-" });
  try {
    const binary = `${dir}/bin`;
    await writeStandIn(binary);
    await fn({ dir, root: `${dir}/root`, binary });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** path relative to the listed root → "dir 0755", "file 0644 <sha256>" or "link -> target". */
export type Listing = Record<string, string>;

export async function listTree(root: string): Promise<Listing> {
  const listing: Listing = {};
  async function walk(dir: string, prefix: string) {
    const names: string[] = [];
    for await (const entry of Deno.readDir(dir)) names.push(entry.name);
    for (const name of names.sort()) {
      const path = join(dir, name);
      const rel = prefix === "" ? name : `${prefix}/${name}`;
      const info = await Deno.lstat(path);
      const mode = ((info.mode ?? 0) & 0o7777).toString(8).padStart(4, "0");
      if (info.isSymlink) {
        listing[rel] = `link -> ${await Deno.readLink(path)}`;
      } else if (info.isDirectory) {
        listing[rel] = `dir ${mode}`;
        await walk(path, rel);
      } else {
        listing[rel] = `file ${mode} ${await sha256File(path)}`;
      }
    }
  }
  await walk(root, "");
  return listing;
}

export async function sha256File(path: string): Promise<string> {
  return createHash("sha256").update(await Deno.readFile(path)).digest("hex");
}
