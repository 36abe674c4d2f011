/**
 * The module graph Deno itself resolves from a set of files: one `deno info --json` of a module
 * that imports them all, so static, dynamic and type-only imports count as Deno sees them, and
 * npm packages appear by specifier. The fast test loop's selection (unit_tests.ts), the layers
 * test and the lazy-loading test all read the code through it.
 */
import { join } from "node:path";
import { pathToFileURL } from "node:url";

export interface GraphDependency {
  specifier: string;
  /** The module the import loads when it runs; absent for a type-only import. */
  code?: { specifier: string };
  type?: { specifier: string };
  isDynamic?: boolean;
}

export interface GraphModule {
  specifier: string;
  /** Its file, for a local module. */
  local?: string;
  error?: string;
  dependencies?: GraphDependency[];
}

/**
 * Every module `files` (absolute paths) reach, by specifier. `config`: the deno.json that
 * resolves bare specifiers; without it, none is read.
 */
export async function moduleGraph(
  files: readonly string[],
  config?: string,
): Promise<Map<string, GraphModule>> {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-module-graph-" });
  try {
    const entry = join(dir, "all.ts");
    await Deno.writeTextFile(
      entry,
      files.map((file) => `import ${JSON.stringify(pathToFileURL(file).href)};\n`).join(""),
    );
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["info", "--json", ...(config ? ["--config", config] : ["--no-config"]), entry],
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!out.success) {
      throw new Error(`deno info failed: ${new TextDecoder().decode(out.stderr).trim()}`);
    }
    const info = JSON.parse(new TextDecoder().decode(out.stdout)) as { modules: GraphModule[] };
    const entryUrl = pathToFileURL(entry).href;
    return new Map(
      info.modules.filter((m) => m.specifier !== entryUrl).map((m) => [m.specifier, m]),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
