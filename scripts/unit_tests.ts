/**
 * The fast test loop, `deno task test:unit`: every test file under tests/ whose code, followed
 * through its imports, neither talks over a network nor starts a process (no containerd, no
 * shellcheck or systemd-analyze, no simulated peers, no `ckpt-agent` subprocess, no tmpfs
 * mounts). Which files those are is read from the module graph each time, never from a list, so
 * a test file that is added, moved or renamed is in the right loop without anyone updating
 * anything. The chosen files then run without network or process permissions: a test that would
 * open a socket or start a process fails here instead of slipping in.
 *
 * `deno task test` still runs every file, these included.
 */
import { join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { type GraphModule, moduleGraph } from "./module_graph.ts";
import { AGENT_PERMISSIONS } from "./permissions.ts";

/** What makes a module slow, and the way it shows in the module's source or its imports. */
export const SLOW_CAPABILITIES: readonly { what: string; pattern: RegExp }[] = [
  {
    what: "network",
    pattern:
      /\bDeno\.(serve|listen|listenTls|listenDatagram|connect|connectTls|startTls|connectQuic)\b|\bfetch\(|\bnew WebSocket\b/,
  },
  { what: "process", pattern: /\bnew Deno\.Command\b|\bDeno\.(run|kill)\(/ },
];

/** Node built-ins that reach the network or other processes. */
export const SLOW_BUILTINS: ReadonlySet<string> = new Set(
  ["http", "https", "http2", "net", "tls", "dgram", "child_process", "worker_threads"]
    .map((name) => `node:${name}`),
);

/** What may be taken from a slow built-in without reaching anything: address checks. */
const HARMLESS_IMPORTS: ReadonlySet<string> = new Set(["isIP", "isIPv4", "isIPv6"]);

/**
 * The permissions the chosen files run with: the agent's own (permissions.ts) but the network;
 * it has no process permission to take away.
 */
export const UNIT_TEST_PERMISSIONS: readonly string[] = [
  "--no-prompt",
  ...AGENT_PERMISSIONS.map((p) => p.flag).filter((flag) => flag !== "--allow-net"),
];

export interface Selection {
  /** Test files of the fast loop, relative to the repository, sorted. */
  unit: string[];
  /** Every other test file, with the first slow thing its imports reach. */
  slow: Map<string, string>;
  /** Modules of lib/ that the fast loop's files run, directly or through other modules. */
  unitReaches: Set<string>;
}

const ROOT = fileURLToPath(new URL("..", import.meta.url));

function testFiles(dir: string): string[] {
  const files: string[] = [];
  for (const entry of Deno.readDirSync(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory) files.push(...testFiles(path));
    else if (entry.isFile && /_test\.(ts|js|mjs)$/.test(entry.name)) files.push(path);
  }
  return files;
}

/** The source without its comments, which may name anything. */
function code(source: string): string {
  return source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:])\/\/.*$/gm, "$1");
}

/** Whether a module takes from `builtin` more than HARMLESS_IMPORTS. */
function usesBuiltin(source: string, builtin: string): boolean {
  const quoted = JSON.stringify(builtin).replaceAll("/", "\\/");
  const named = new RegExp(`import\\s*\\{([^}]*)\\}\\s*from\\s*${quoted}`, "g");
  const statements = [...source.matchAll(new RegExp(`from\\s*${quoted}`, "g"))].length;
  const harmless =
    [...source.matchAll(named)].filter(([, names]) =>
      names.split(",").map((n) => n.trim()).filter(Boolean).every((n) => HARMLESS_IMPORTS.has(n))
    ).length;
  return statements > harmless;
}

/** Why a module is slow by itself (not through its imports), if it is. */
function ownSlowness(module: GraphModule): string | undefined {
  if (!module.local || !module.specifier.startsWith("file:")) return undefined;
  const source = code(Deno.readTextFileSync(module.local));
  const where = relative(ROOT, module.local);
  for (const dependency of module.dependencies ?? []) {
    const builtin = dependency.code?.specifier;
    if (builtin && SLOW_BUILTINS.has(builtin) && usesBuiltin(source, builtin)) {
      return `${builtin} (${where})`;
    }
  }
  const found = SLOW_CAPABILITIES.find(({ pattern }) => pattern.test(source));
  return found && `${found.what} (${where})`;
}

/**
 * Splits the test files under `testsDir` into the fast loop and the rest. Only imports that
 * run code are followed: a type-only import starts nothing.
 */
export async function selectUnitTests(testsDir = join(ROOT, "tests")): Promise<Selection> {
  const files = testFiles(testsDir).sort();
  const graph = await moduleGraph(files, join(ROOT, "deno.json"));
  const ownReason = new Map<string, string | undefined>();
  /** Every module `root` runs, and the first slow thing among them. */
  const closure = (root: string) => {
    const modules = new Set([root]);
    let why: string | undefined;
    for (const specifier of modules) {
      const module = graph.get(specifier);
      if (!module) continue;
      if (!ownReason.has(specifier)) ownReason.set(specifier, ownSlowness(module));
      why ??= ownReason.get(specifier);
      for (const dependency of module.dependencies ?? []) {
        if (dependency.code) modules.add(dependency.code.specifier);
      }
    }
    return { modules, why };
  };
  const lib = pathToFileURL(join(ROOT, "lib")).href + "/";
  const libPath = (specifier: string) => relative(ROOT, fileURLToPath(specifier));
  const selection: Selection = {
    unit: [],
    slow: new Map(),
    unitReaches: new Set(),
  };
  for (const file of files) {
    const { modules, why } = closure(pathToFileURL(file).href);
    const name = relative(ROOT, file);
    if (why) {
      selection.slow.set(name, why);
      continue;
    }
    selection.unit.push(name);
    for (const m of modules) if (m.startsWith(lib)) selection.unitReaches.add(libPath(m));
  }
  return selection;
}

if (import.meta.main) {
  const { unit, slow } = await selectUnitTests();
  if (Deno.args.includes("--list")) {
    for (const file of unit) console.log(`unit  ${file}`);
    for (const [file, why] of slow) console.log(`slow  ${file}  (${why})`);
    Deno.exit(0);
  }
  console.error(`test:unit: ${unit.length} of ${unit.length + slow.size} test files`);
  const run = await new Deno.Command(Deno.execPath(), {
    args: ["test", ...UNIT_TEST_PERMISSIONS, "--parallel", ...Deno.args, ...unit],
    cwd: ROOT,
  }).spawn().status;
  Deno.exit(run.code);
}
