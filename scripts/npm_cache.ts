/**
 * The npm packages deno.lock pins, found in Deno's npm cache: the build leaves their test data out
 * of the binary (scripts/compile.ts), and the Debian package lists their licenses
 * (scripts/deb.ts).
 */
import { join } from "node:path";

export interface CachedNpmPackage {
  name: string;
  version: string;
  /** The package's directory in Deno's npm cache. */
  dir: string;
}

/** Every package the lock file pins, in lock order, once per registry that holds it. */
export async function lockedNpmPackages(lockFile: string): Promise<CachedNpmPackage[]> {
  const info = await new Deno.Command(Deno.execPath(), { args: ["info", "--json"] }).output();
  const npmCache: string = JSON.parse(new TextDecoder().decode(info.stdout)).npmCache;
  const lock = JSON.parse(await Deno.readTextFile(lockFile)) as { npm?: Record<string, unknown> };
  const registries = await Array.fromAsync(Deno.readDir(npmCache)).catch(() => []);
  const found: CachedNpmPackage[] = [];
  for (const pkg of Object.keys(lock.npm ?? {})) {
    const at = pkg.lastIndexOf("@");
    const [name, version] = [pkg.slice(0, at), pkg.slice(at + 1)];
    for (const registry of registries) {
      const dir = join(npmCache, registry.name, name, version);
      if ((await Deno.stat(dir).catch(() => undefined))?.isDirectory) {
        found.push({ name, version, dir });
      }
    }
  }
  return found;
}
