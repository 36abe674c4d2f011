/**
 * The unit's file-system view: under `ProtectSystem=strict` the agent can write only what
 * `ReadWritePaths=` (and `StateDirectory=` and friends) make writable, and each such entry is a
 * mount of its own, so the static-pod dir and the inactive dir must come through one entry for
 * activation to hard-link. Read from the unit file and its drop-ins, as systemd loads them: the
 * compiled agent may not start processes, so `systemctl show` is not asked.
 */
import { dirname, join, relative, sep } from "node:path";
import { SETTINGS } from "../config/settings.ts";
import type { Config } from "../config/types.ts";
import { resolvedPath } from "../disk/mounts.ts";
import { configuredDirs, describeDir, dirProblem } from "./dirs.ts";
import { type Finding, ok, warning } from "./finding.ts";

export const UNIT_NAME = "ckpt-agent.service";

/** Where systemd looks for system units, the directory that wins first (systemd.unit(5)). */
export const SYSTEM_UNIT_PATH: readonly string[] = [
  "/etc/systemd/system.control",
  "/run/systemd/system.control",
  "/run/systemd/transient",
  "/etc/systemd/system",
  "/run/systemd/system",
  "/usr/local/lib/systemd/system",
  "/usr/lib/systemd/system",
  "/lib/systemd/system",
];

/**
 * The search path as systemd reads `$SYSTEMD_UNIT_PATH`: its directories, separated by colons,
 * then the default path if it ends with a colon; unset, the default path.
 */
export function unitSearchPath(variable: string | undefined): string[] {
  if (variable === undefined || variable === "") return [...SYSTEM_UNIT_PATH];
  const dirs = variable.split(":");
  const appendDefaults = dirs.at(-1) === "";
  return [...dirs.filter((d) => d !== ""), ...(appendDefaults ? SYSTEM_UNIT_PATH : [])];
}

/** Key → values of one section; a list setting's values, one word each. */
export type UnitEntries = Map<string, string[]>;

/** A value's words, as systemd splits a list: at whitespace, quotes holding words together. */
function words(value: string): string[] {
  return [...value.matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3]);
}

/**
 * The entries of `section` in unit files read in order (the unit, then its drop-ins): a repeated
 * key adds to the list, an empty assignment (`ReadWritePaths=`) empties it. Comments start with
 * `#` or `;`, and a line ending in `\` goes on on the next.
 */
export function sectionEntries(texts: readonly string[], section: string): UnitEntries {
  const entries: UnitEntries = new Map();
  for (const text of texts) {
    let current = "";
    for (const line of text.replace(/\\\n/g, " ").split("\n").map((l) => l.trim())) {
      if (line === "" || line.startsWith("#") || line.startsWith(";")) continue;
      if (line.startsWith("[")) {
        current = line.slice(1, line.indexOf("]"));
        continue;
      }
      const eq = line.indexOf("=");
      if (current !== section || eq < 0) continue;
      const key = line.slice(0, eq).trim();
      const value = line.slice(eq + 1).trim();
      entries.set(key, value === "" ? [] : [...entries.get(key) ?? [], ...words(value)]);
    }
  }
  return entries;
}

export interface UnitFiles {
  unit: string;
  /** `<unit>.d/*.conf`, in the order systemd applies them: by file name, a name found in a
   *  directory earlier in the search path hiding the same name later. */
  dropIns: string[];
}

/** The unit's file and drop-ins in the search path; undefined when no directory has it. */
export async function findUnitFiles(
  searchPath: readonly string[],
  name = UNIT_NAME,
): Promise<UnitFiles | undefined> {
  let unit: string | undefined;
  for (const dir of searchPath) {
    const candidate = join(dir, name);
    // lstat: a unit linked to /dev/null (masked) is found too.
    if (await Deno.lstat(candidate).then(() => true, () => false)) {
      unit = candidate;
      break;
    }
  }
  if (unit === undefined) return undefined;
  const byName = new Map<string, string>();
  for (const dir of searchPath) {
    try {
      for await (const entry of Deno.readDir(join(dir, `${name}.d`))) {
        if (entry.name.endsWith(".conf") && !byName.has(entry.name)) {
          byName.set(entry.name, join(dir, `${name}.d`, entry.name));
        }
      }
    } catch {
      // No drop-ins there.
    }
  }
  const dropIns = [...byName.keys()].sort().map((file) => byName.get(file)!);
  return { unit, dropIns };
}

/** What one entry makes of the paths below it. */
export interface PathRule {
  path: string;
  writable: boolean;
  /** The entry as the unit says it: `ReadWritePaths=-/etc/kubernetes`. */
  entry: string;
}

const PROTECTED: Record<string, readonly string[]> = {
  strict: ["/"],
  full: ["/usr", "/boot", "/efi", "/etc"],
  yes: ["/usr", "/boot", "/efi"],
  true: ["/usr", "/boot", "/efi"],
};

/** The `*Directory=` settings systemd makes writable under ProtectSystem, and where. */
const MANAGED_DIRS: Record<string, string> = {
  StateDirectory: "/var/lib",
  RuntimeDirectory: "/run",
  CacheDirectory: "/var/cache",
  LogsDirectory: "/var/log",
};

/**
 * Every rule of a `[Service]` section about what may be written (systemd.exec(5)). Not among
 * them: PrivateTmp=, whose /tmp is the unit's own, where nothing the kubelet reads can be.
 */
export function pathRules(service: UnitEntries): PathRule[] {
  const rules: PathRule[] = [];
  const protect = service.get("ProtectSystem")?.at(-1) ?? "no";
  for (const path of PROTECTED[protect] ?? []) {
    rules.push({ path, writable: false, entry: `ProtectSystem=${protect}` });
  }
  for (const key of ["ReadWritePaths", "ReadOnlyPaths", "InaccessiblePaths"]) {
    for (const value of service.get(key) ?? []) {
      // "-": a missing path is no error; "+": relative to RootDirectory=, which the unit has not.
      const path = value.replace(/^[-+]+/, "");
      rules.push({ path, writable: key === "ReadWritePaths", entry: `${key}=${value}` });
    }
  }
  for (const [key, base] of Object.entries(MANAGED_DIRS)) {
    for (const name of service.get(key) ?? []) {
      rules.push({ path: join(base, name.split(":")[0]), writable: true, entry: `${key}=${name}` });
    }
  }
  return rules;
}

function under(base: string, path: string): boolean {
  return base === "/" || path === base || path.startsWith(`${base}/`);
}

/**
 * The rule that decides about `path`: the one for the longest path that is `path` or holds it,
 * as systemd mounts the more specific entry over the other (a read-only one winning a tie).
 * Undefined: nothing in the unit restricts it.
 */
export function governingRule(rules: readonly PathRule[], path: string): PathRule | undefined {
  let found: PathRule | undefined;
  for (const rule of rules) {
    if (!under(rule.path, path)) continue;
    const longer = found === undefined || rule.path.length > found.path.length;
    const tie = found !== undefined && rule.path.length === found.path.length;
    if (longer || (tie && !rule.writable)) found = rule;
  }
  return found;
}

function commonParent(a: string, b: string): string {
  let parent = a;
  while (parent !== dirname(parent) && relative(parent, b).split(sep)[0] === "..") {
    parent = dirname(parent);
  }
  return parent;
}

const RESTART = "then `systemctl daemon-reload && systemctl restart ckpt-agent`";

export async function unitFindings(
  config: Config,
  searchPath: readonly string[],
): Promise<Finding[]> {
  const files = await findUnitFiles(searchPath);
  if (files === undefined) {
    return [warning(
      "unit",
      UNIT_NAME,
      `not checked: no ${UNIT_NAME} in ${searchPath.join(", ")}`,
      "install the unit (install.sh); where the agent does not run under systemd, this does not " +
        "apply",
    )];
  }
  const read = [files.unit, ...files.dropIns];
  if (resolvedPath(files.unit) === "/dev/null") {
    return [warning("unit", files.unit, `${UNIT_NAME} is masked`, "systemctl unmask ckpt-agent")];
  }
  const service = sectionEntries(
    await Promise.all(read.map((file) => Deno.readTextFile(file))),
    "Service",
  );
  const rules = pathRules(service).map((rule) => ({ ...rule, path: resolvedPath(rule.path) }));
  const seen = `as ${read.join(" and ")} say`;
  const dirs = configuredDirs(config);
  const findings: Finding[] = dirs.map((dir) => {
    const rule = governingRule(rules, resolvedPath(dir.path));
    if (rule?.writable ?? true) {
      return ok(
        "unit",
        dir.path,
        `the unit can write ${describeDir(dir)} (${
          rule ? rule.entry : "nothing in the unit restricts it"
        }), ${seen}`,
      );
    }
    const found = `the unit cannot write ${describeDir(dir)} (${dir.setting}): ${rule!.entry} ` +
      `makes it read-only, ${seen}`;
    const dropIn = `add it with a drop-in (\`systemctl edit ckpt-agent\`: [Service] ` +
      `ReadWritePaths=-${dir.path}${
        dir.setting === "staticPodDir" || dir.setting === "inactiveDir"
          ? `, or one entry that holds both staticPodDir and inactiveDir`
          : ""
      }), ${RESTART}`;
    // A writable path is not enough for the lock: its directory must be root's alone.
    const fix = dir.role === "lock"
      ? `move lockFile into the unit's RuntimeDirectory= (the default ` +
        `${SETTINGS.lockFile.default}), or, for a directory only root can write, ${dropIn}`
      : dropIn;
    return dirProblem(dir, "unit", found, fix);
  });
  const active = governingRule(rules, resolvedPath(config.staticPodDir));
  const inactive = governingRule(rules, resolvedPath(config.inactiveDir));
  const subject = `${config.staticPodDir}, ${config.inactiveDir}`;
  if (active === inactive) {
    findings.push(ok(
      "unit",
      subject,
      `the unit gives staticPodDir and inactiveDir one mount (${
        active?.entry ?? "neither is restricted"
      }): activation hard-links`,
    ));
  } else {
    findings.push(warning(
      "unit",
      subject,
      `the unit mounts staticPodDir (${active?.entry ?? "unrestricted"}) and inactiveDir (${
        inactive?.entry ?? "unrestricted"
      }) separately: activation copies the manifest instead of hard-linking it, and a copy ` +
        "fails on a full disk",
      `make one ReadWritePaths= entry hold both (\`systemctl edit ckpt-agent\`: [Service] ` +
        `ReadWritePaths=-${
          commonParent(config.staticPodDir, config.inactiveDir)
        }, and drop the separate ones), ${RESTART}`,
    ));
  }
  return findings;
}
