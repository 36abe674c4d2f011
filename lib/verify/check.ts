/** What a `verify` check is, and the helpers every check shares. */

import { octalMode } from "../core/checkpoint_layout.ts";

export interface Finding {
  file: string;
  problem: string;
}

export interface CheckResult {
  /** Files examined. */
  checked: number;
  findings: Finding[];
}

export interface Check {
  name: string;
  run(): Promise<CheckResult>;
}

/** A finding when `mode` (permission bits, null when unknown) is not `expected`. */
export function modeFinding(file: string, mode: number | null, expected: number): Finding[] {
  return mode === null || mode === expected
    ? []
    : [{ file, problem: `mode ${octalMode(mode)}, expected ${octalMode(expected)}` }];
}

/** Permission bits; undefined when the path is gone. */
export async function modeOf(path: string): Promise<number | null | undefined> {
  try {
    const info = await Deno.stat(path);
    return info.mode === null ? null : info.mode & 0o7777;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
}
