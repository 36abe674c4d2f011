/**
 * `ckpt-agent verify [--config FILE] [--state-dir DIR] [--output json]`: checks every record of
 * both stores, every checkpoint manifest and every stored secret/configmap file, and prints what
 * is wrong; exit 0 when all is sound, 1 otherwise, 2 for bad flags or configuration. Read-only: it
 * never moves or deletes anything, so runbooks run it beside the daemon before trusting a node.
 */
import { commandOptions } from "../cli/commands.ts";
import { EXIT_FAILURE, EXIT_OK, UsageError } from "../cli/errors.ts";
import { type OutputFormat, outputFormat } from "../cli/output.ts";
import { loadConfig } from "../config/load.ts";
import type { Config } from "../config/types.ts";
import { SANDBOX_RECORDS } from "../store/sandbox_checkpoint.ts";
import { STATUS_RECORDS } from "../store/status_record.ts";
import { type Check, type Finding, modeOf } from "../verify/check.ts";
import { manifestCheck, storedFilesCheck } from "../verify/files.ts";
import { hostPortCheck } from "../verify/host_ports.ts";
import { recordCheck } from "../verify/records.ts";

export function checksFor(config: Config): Check[] {
  return [
    recordCheck("status records", STATUS_RECORDS, config.stateDir),
    recordCheck("sandbox checkpoint records", SANDBOX_RECORDS, config.stateDir),
    manifestCheck(config),
    hostPortCheck(config),
    storedFilesCheck(config),
  ];
}

export interface VerifyReport {
  stateDir: string;
  checked: number;
  findings: Finding[];
}

export async function runChecks(stateDir: string, checks: readonly Check[]): Promise<VerifyReport> {
  const report: VerifyReport = { stateDir, checked: 0, findings: [] };
  if (await modeOf(stateDir) === undefined) {
    // Most likely a mistyped --state-dir: saying "all sound" would mislead.
    report.findings.push({ file: stateDir, problem: "no such directory" });
    return report;
  }
  for (const check of checks) {
    const result = await check.run();
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
      ? `ok: ${files} checked, all sound`
      : `${n} problem${n === 1 ? "" : "s"} in ${files} checked`,
  );
  return lines.join("\n");
}

/** `--json` is the older spelling of `--output json`, kept for runbooks that use it. */
function verifyOutput(extra: Record<string, unknown>): OutputFormat {
  const output = outputFormat(extra.output);
  if (extra.json !== true) return output;
  if (extra.output !== undefined && output !== "json") {
    throw new UsageError(`--json: the same as --output json, not with --output ${output}`);
  }
  return "json";
}

export async function verifyCommand(args: string[]): Promise<number> {
  const { config, extra } = await loadConfig(args, {
    extraFlags: commandOptions("verify"),
  });
  const output = verifyOutput(extra);
  const report = await runChecks(config.stateDir, checksFor(config));
  const sound = report.findings.length === 0;
  console.log(output === "json" ? JSON.stringify({ ...report, sound }) : formatReport(report));
  return sound ? EXIT_OK : EXIT_FAILURE;
}
