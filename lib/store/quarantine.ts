/**
 * Where a record the stores cannot serve goes: the quarantine, and the root-only directories it
 * and the stores are made of (created durably: the parent is fsynced after).
 */
import { basename, dirname, join } from "node:path";
import { syncDir, withSuffix } from "../disk/atomic_write.ts";
import { ownTree, pathExists } from "../disk/dirs.ts";
import { formatInstant, type Instant } from "../core/time.ts";
import { QUARANTINE_DIR, STORE_DIR_MODE } from "./layout.ts";

/**
 * Makes `stateDir/<subs…>` exist, the agent's alone (ownTree), with mode 0700. The state directory itself is created when missing
 * but its mode is left alone: an operator may have chosen it. A directory already 0700 is not
 * touched: a chmod, even to the same mode, changes its ctime, and every `--once` opens the stores.
 */
export async function ensureStoreDir(stateDir: string, ...subs: string[]): Promise<string> {
  const dir = join(stateDir, ...subs);
  // Never through a link (docs/design.md#no-links): what is in the way is removed.
  await ownTree(stateDir, dir, undefined);
  const { mode } = await Deno.lstat(dir);
  if (mode === null || (mode & 0o7777) !== STORE_DIR_MODE) await Deno.chmod(dir, STORE_DIR_MODE);
  return dir;
}

/**
 * Moves a bad record out of its store into `quarantine/<store>/<name>.<timestamp>` (with `.N`
 * appended should that exist; the name cut short when all would not fit in a file name), so
 * nothing is lost and the store can serve the rest.
 */
export async function quarantine(
  stateDir: string,
  storeDir: string,
  path: string,
  now: Instant,
): Promise<string> {
  const dir = await ensureStoreDir(stateDir, QUARANTINE_DIR, basename(storeDir));
  // A record's name may be as long as a file name can be: its start is kept, the rest whole.
  const stamp = `.${formatInstant(now)}`;
  let target = join(dir, withSuffix(basename(path), stamp));
  // One process owns the state directory (the lock file), so nothing races this probe.
  for (let n = 1; await pathExists(target); n++) {
    target = join(dir, withSuffix(basename(path), `${stamp}.${n}`));
  }
  await Deno.rename(path, target);
  await syncDir(dir);
  await syncDir(dirname(path));
  return target;
}
