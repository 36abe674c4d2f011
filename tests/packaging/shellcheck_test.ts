/** Every shell script in the repository passes shellcheck (a missing shellcheck fails). */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { INSTALL_SH, REPO, run } from "./tools.ts";

const SKIPPED_DIRS = new Set([".git", "node_modules", "dist", "coverage"]);

async function isShellScript(path: string): Promise<boolean> {
  if (path.endsWith(".sh")) return true;
  const file = await Deno.open(path);
  try {
    const head = new Uint8Array(64);
    const n = await file.read(head) ?? 0;
    const first = new TextDecoder().decode(head.subarray(0, n)).split("\n")[0];
    return /^#!\s*\S*\/(env\s+)?(ba|da|k)?sh\b/.test(first);
  } finally {
    file.close();
  }
}

async function shellScripts(dir: string): Promise<string[]> {
  const found: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory && !SKIPPED_DIRS.has(entry.name)) found.push(...await shellScripts(path));
    if (entry.isFile && await isShellScript(path)) found.push(path);
  }
  return found.sort();
}

Deno.test("shellcheck passes on install.sh and every other shell script", async () => {
  const scripts = await shellScripts(REPO);
  assert(scripts.includes(INSTALL_SH), scripts.join(" "));
  const r = await run("shellcheck", ["--external-sources", ...scripts]);
  assertEquals({ code: r.code, output: r.stdout + r.stderr }, { code: 0, output: "" });
});
