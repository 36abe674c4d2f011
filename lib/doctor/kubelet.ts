/**
 * Which directory the kubelet reads static pods from, and whether it is `staticPodDir`: a
 * checkpoint activated anywhere else would never start.
 *
 * The kubelet decides it as `--pod-manifest-path` on its command line, else the last
 * `staticPodPath` of the drop-ins in its `--config-dir`, else `staticPodPath` in its `--config`
 * file (flags over drop-ins over the file). The running kubelet's command line is read from
 * /proc/<pid>/cmdline; without a running kubelet to read (or where /proc cannot be read), the
 * `kubeletConfigFile` setting names the file to read instead.
 */
import { basename, dirname, join, resolve } from "node:path";
import { parse as parseYaml } from "yaml";
import * as v from "valibot";
import { check, looseObject } from "../core/schema.ts";
import type { Config } from "../config/types.ts";
import { resolvedPath } from "../disk/mounts.ts";
import { error, type Finding, ok, unreadableBecause, warning } from "./finding.ts";

export interface KubeletProcess {
  pid: number;
  /** Its command line, the program first. */
  args: string[];
}

function isKubelet(comm: string, args: string[]): boolean {
  return comm.trim() === "kubelet" || (args.length > 0 && basename(args[0]) === "kubelet");
}

/**
 * The kubelets among the processes in `procRoot` (/proc, or a tree laid out like it). Throws
 * when `procRoot` cannot be listed; a process that ends while it is read is skipped.
 */
export async function findKubelets(procRoot: string): Promise<KubeletProcess[]> {
  const found: KubeletProcess[] = [];
  for await (const entry of Deno.readDir(procRoot)) {
    if (!/^\d+$/.test(entry.name)) continue;
    const dir = join(procRoot, entry.name);
    try {
      const args = (await Deno.readTextFile(join(dir, "cmdline"))).split("\0");
      if (args.at(-1) === "") args.pop();
      const comm = await Deno.readTextFile(join(dir, "comm"));
      if (isKubelet(comm, args)) found.push({ pid: Number(entry.name), args });
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
  }
  return found.sort((a, b) => a.pid - b.pid);
}

/** A flag's last value, `--name=value` or `--name value`, as the kubelet's flag parser reads it. */
export function flagValue(args: readonly string[], name: string): string | undefined {
  let value: string | undefined;
  for (let i = 1; i < args.length; i++) {
    const arg = args[i];
    if (arg === "--") break;
    if (arg === `--${name}`) value = args[++i];
    else if (arg.startsWith(`--${name}=`)) value = arg.slice(name.length + 3);
  }
  return value;
}

const KubeletConfigurationSchema = looseObject({
  kind: v.literal("KubeletConfiguration"),
  staticPodPath: v.optional(v.string()),
});

/** What a KubeletConfiguration file says about the static-pod directory. */
export type ConfigFileView =
  | { kind: "absent" }
  | { kind: "unusable"; problem: string }
  /** `staticPodPath` resolved (a relative one against the file's directory); unset: none. */
  | { kind: "read"; staticPodPath?: string };

export async function readKubeletConfig(file: string): Promise<ConfigFileView> {
  let text: string;
  try {
    text = await Deno.readTextFile(file);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return { kind: "absent" };
    return { kind: "unusable", problem: `cannot be read: ${(e as Error).message}` };
  }
  let doc: unknown;
  try {
    // JSON is YAML too: the kubelet reads either.
    doc = parseYaml(text, { prettyErrors: false });
  } catch (e) {
    return {
      kind: "unusable",
      problem: `not YAML or JSON: ${(e as Error).message.split("\n")[0]}`,
    };
  }
  const parsed = check(KubeletConfigurationSchema, doc);
  if (!parsed.success) {
    return { kind: "unusable", problem: "not a KubeletConfiguration (kind, staticPodPath)" };
  }
  const path = parsed.output.staticPodPath;
  return { kind: "read", ...(path ? { staticPodPath: resolve(dirname(file), path) } : {}) };
}

/** Where one kubelet reads static pods from, as far as doctor could tell. */
interface KubeletView {
  /** The kubelet: a process, or the configuration file alone. */
  who: string;
  /** The directory; undefined: none is configured. */
  dir?: string;
  /** Where the directory (or its absence) was read. */
  from: string;
  /** A running kubelet was read: what it says is certain, not only what a file says. */
  running: boolean;
  /** A file that should have said and could not be read. */
  problem?: string;
}

/** The `*.conf` drop-ins of a `--config-dir`, in the order the kubelet applies them. */
async function dropIns(dir: string): Promise<string[]> {
  const names: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    if (entry.isFile && entry.name.endsWith(".conf")) names.push(entry.name);
  }
  return names.sort().map((name) => join(dir, name));
}

async function processView(kubelet: KubeletProcess): Promise<KubeletView> {
  const who = `the running kubelet (pid ${kubelet.pid})`;
  const view = { who, running: true };
  const flag = flagValue(kubelet.args, "pod-manifest-path");
  if (flag) return { ...view, dir: resolve("/", flag), from: "its --pod-manifest-path flag" };
  const configDir = flagValue(kubelet.args, "config-dir");
  if (configDir) {
    let files: string[] = [];
    try {
      files = await dropIns(resolve("/", configDir));
    } catch (e) {
      return { ...view, from: `--config-dir ${configDir}`, problem: (e as Error).message };
    }
    for (const file of files.toReversed()) {
      const read = await readKubeletConfig(file);
      if (read.kind === "unusable") return { ...view, from: file, problem: read.problem };
      if (read.kind === "read" && read.staticPodPath) {
        return { ...view, dir: read.staticPodPath, from: `staticPodPath in ${file}` };
      }
    }
  }
  const file = flagValue(kubelet.args, "config");
  if (!file) {
    return { ...view, from: "neither --pod-manifest-path nor --config on its command line" };
  }
  return fileView(view, resolve("/", file));
}

async function fileView(view: Omit<KubeletView, "from">, file: string): Promise<KubeletView> {
  const read = await readKubeletConfig(file);
  if (read.kind === "absent") return { ...view, from: file, problem: "does not exist" };
  if (read.kind === "unusable") return { ...view, from: file, problem: read.problem };
  return read.staticPodPath
    ? { ...view, dir: read.staticPodPath, from: `staticPodPath in ${file}` }
    : { ...view, from: `no staticPodPath in ${file}` };
}

const SUBJECT = "staticPodDir";

function judge(view: KubeletView, staticPodDir: string): Finding {
  const howToChange = `or make the kubelet read ${staticPodDir} (staticPodPath in its ` +
    "configuration file, or --pod-manifest-path) and restart it";
  if (view.problem !== undefined) {
    return warning(
      "static-pod-dir",
      SUBJECT,
      `${view.who}: ${view.from}: ${view.problem}; which directory the kubelet reads static ` +
        "pods from is not known",
      `correct ${view.from}, or set kubeletConfigFile to the file the kubelet reads (its --config)`,
    );
  }
  if (view.dir === undefined) {
    const found = `${view.who} reads static pods from no directory (${view.from}): an ` +
      "activated checkpoint would never start";
    const fix = `set staticPodPath: ${staticPodDir} in the kubelet's configuration file and ` +
      "restart the kubelet";
    // A file alone does not show the command line, which may name a directory.
    return view.running ? error("static-pod-dir", SUBJECT, found, fix) : warning(
      "static-pod-dir",
      SUBJECT,
      `${found}, unless its command line has --pod-manifest-path`,
      fix,
    );
  }
  const theirs = resolvedPath(view.dir), ours = resolvedPath(staticPodDir);
  const shown = (path: string, real: string) => path === real ? path : `${path} (${real})`;
  if (theirs === ours) {
    return ok(
      "static-pod-dir",
      SUBJECT,
      `${view.who} reads static pods from ${shown(view.dir, theirs)} (${view.from}), which is ` +
        "staticPodDir",
    );
  }
  return error(
    "static-pod-dir",
    SUBJECT,
    `${view.who} reads static pods from ${shown(view.dir, theirs)} (${view.from}), not from ` +
      `staticPodDir ${shown(staticPodDir, ours)}: an activated checkpoint would never start`,
    `set staticPodDir to ${view.dir} (staticPodDir in the configuration file, or ` +
      `--static-pod-dir), ${howToChange}`,
  );
}

export async function staticPodDirFindings(config: Config, procRoot: string): Promise<Finding[]> {
  let kubelets: KubeletProcess[] = [];
  let unseen = "";
  try {
    kubelets = await findKubelets(procRoot);
    if (kubelets.length === 0) unseen = `no kubelet runs (none in ${procRoot})`;
  } catch (e) {
    unseen = `the running kubelet was not looked for: ${procRoot} cannot be read ` +
      `(${unreadableBecause(e)})`;
  }
  if (kubelets.length > 0) {
    return await Promise.all(
      kubelets.map(async (kubelet) => judge(await processView(kubelet), config.staticPodDir)),
    );
  }
  const file = config.kubeletConfigFile;
  const view = await fileView({ who: `the kubelet configured by ${file}`, running: false }, file);
  if (view.problem === "does not exist") {
    return [warning(
      "static-pod-dir",
      SUBJECT,
      `not checked: ${unseen}, and kubeletConfigFile ${file} does not exist`,
      "set kubeletConfigFile (--kubelet-config-file) to the file the kubelet's --config flag " +
        "names, or run doctor where the kubelet runs",
    )];
  }
  const finding = judge(view, config.staticPodDir);
  return [{ ...finding, found: `${finding.found}; ${unseen}` }];
}
