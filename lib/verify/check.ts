/** What a `verify` check is, and the helpers every check shares. */

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

function octal(mode: number): string {
  return `0${mode.toString(8)}`;
}

/** A finding when `mode` (permission bits, null when unknown) is not `expected`. */
export function modeFinding(file: string, mode: number | null, expected: number): Finding[] {
  return mode === null || mode === expected
    ? []
    : [{ file, problem: `mode ${octal(mode)}, expected ${octal(expected)}` }];
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
