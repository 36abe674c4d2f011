/**
 * What `ckpt-agent verify` checks on a node: every record of both stores, every checkpoint
 * manifest, the host ports of active checkpoints and every stored secret/configmap file, in
 * that order. Read-only, like every check.
 */
import type { Config } from "../config/types.ts";
import { SANDBOX_RECORDS } from "../store/sandbox_checkpoint.ts";
import { STATUS_RECORDS } from "../store/status_record.ts";
import { type Check, type Finding, modeOf } from "./check.ts";
import { manifestCheck, storedFilesCheck } from "./files.ts";
import { hostPortCheck } from "./host_ports.ts";
import { recordCheck } from "./records.ts";

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
