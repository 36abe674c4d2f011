/**
 * `ckpt-agent verify [--state-dir DIR] [--json]`: checks every record of both stores and prints
 * what is wrong; exit 0 when all is sound, 1 otherwise, 2 for bad flags. Read-only: it never
 * moves or deletes anything, so it is safe to run beside the daemon and before trusting a node.
 * Each check produces findings {file, problem}; more checks join the CHECKS list.
 */
import { parseFlags } from "../cli/args.ts";
import { EXIT_FAILURE, EXIT_OK, UsageError } from "../cli/errors.ts";
import { DEFAULT_STATE_DIR, RECORD_FILE_MODE, STORE_DIR_MODE } from "../store/layout.ts";
import { mapConcurrent } from "../store/map_concurrent.ts";
import { readRecordDir, type RecordType } from "../store/record_files.ts";
import { SANDBOX_RECORDS } from "../store/sandbox_checkpoint.ts";
import { STATUS_RECORDS } from "../store/status_record.ts";
import { join } from "node:path";

export interface Finding {
  file: string;
  problem: string;
}

/** What the checks look at; settings join here as checks need them. */
export interface VerifyContext {
  stateDir: string;
}

export interface CheckResult {
  /** Files examined. */
  checked: number;
  findings: Finding[];
}

export interface Check {
  name: string;
  run(context: VerifyContext): Promise<CheckResult>;
}

function octal(mode: number): string {
  return `0${mode.toString(8)}`;
}

function modeFinding(file: string, mode: number | null, expected: number): Finding[] {
  return mode === null || mode === expected
    ? []
    : [{ file, problem: `mode ${octal(mode)}, expected ${octal(expected)}` }];
}

/** Permission bits; undefined when the path is gone. */
async function modeOf(path: string): Promise<number | null | undefined> {
  try {
    const info = await Deno.stat(path);
    return info.mode === null ? null : info.mode & 0o7777;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
}

const STATS_IN_FLIGHT = 32;

/** Every record of one store verifies, sits under its own name, and is private. */
function recordCheck<T>(name: string, type: RecordType<T>): Check {
  return {
    name,
    async run({ stateDir }) {
      const dir = join(stateDir, type.dir);
      const mode = await modeOf(dir);
      // A store that was never opened is empty, not broken.
      if (mode === undefined) return { checked: 0, findings: [] };
      const entries = await readRecordDir(type, dir);
      const perEntry = await mapConcurrent(
        entries,
        STATS_IN_FLIGHT,
        async (entry) =>
          entry.error
            ? [{ file: entry.path, problem: entry.error.problem }]
            : modeFinding(entry.path, await modeOf(entry.path) ?? null, RECORD_FILE_MODE),
      );
      return {
        checked: entries.length,
        findings: [...modeFinding(dir, mode, STORE_DIR_MODE), ...perEntry.flat()],
      };
    },
  };
}

export const CHECKS: readonly Check[] = [
  recordCheck("status records", STATUS_RECORDS),
  recordCheck("sandbox checkpoint records", SANDBOX_RECORDS),
];

export interface VerifyReport {
  stateDir: string;
  checked: number;
  findings: Finding[];
}

export async function runChecks(
  context: VerifyContext,
  checks: readonly Check[] = CHECKS,
): Promise<VerifyReport> {
  const report: VerifyReport = { stateDir: context.stateDir, checked: 0, findings: [] };
  if (await modeOf(context.stateDir) === undefined) {
    // Most likely a mistyped --state-dir: saying "all sound" would mislead.
    report.findings.push({ file: context.stateDir, problem: "no such directory" });
    return report;
  }
  for (const check of checks) {
    const result = await check.run(context);
    report.checked += result.checked;
    report.findings.push(...result.findings);
  }
  return report;
}

function formatReport(report: VerifyReport): string {
  const lines = report.findings.map((f) => `${f.file}: ${f.problem}`);
  const files = `${report.checked} file${report.checked === 1 ? "" : "s"}`;
  const n = report.findings.length;
  lines.push(
    n === 0
      ? `ok: ${files} checked under ${report.stateDir}, all sound`
      : `${n} problem${n === 1 ? "" : "s"} in ${files} checked under ${report.stateDir}`,
  );
  return lines.join("\n");
}

export async function verifyCommand(args: string[]): Promise<number> {
  const { values } = parseFlags(args, {
    "state-dir": { type: "string" },
    json: { type: "boolean" },
  });
  const stateDir = values["state-dir"] ?? DEFAULT_STATE_DIR;
  if (stateDir === "") throw new UsageError("--state-dir: must not be empty");
  const report = await runChecks({ stateDir });
  const sound = report.findings.length === 0;
  console.log(values.json ? JSON.stringify({ ...report, sound }) : formatReport(report));
  return sound ? EXIT_OK : EXIT_FAILURE;
}
