/**
 * `ckpt-agent verify [--config FILE] [--state-dir DIR] [--output json]`: checks every record of
 * both stores, every checkpoint manifest and every stored secret/configmap file, and prints what
 * is wrong; exit 0 when all is sound, 1 otherwise, 2 for bad flags or configuration. Read-only: it
 * never moves or deletes anything, so runbooks run it beside the daemon before trusting a node.
 */
import { commandOptions, commandOutput } from "../cli/commands.ts";
import { EXIT_FAILURE, EXIT_OK } from "../cli/errors.ts";
import { loadConfig } from "../config/load.ts";
import { checksFor, runChecks, type VerifyReport } from "../verify/verify.ts";

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

export async function verifyCommand(args: string[]): Promise<number> {
  const { config, extra } = await loadConfig(args, {
    extraFlags: commandOptions("verify"),
  });
  const output = commandOutput("verify", extra);
  const report = await runChecks(config.stateDir, checksFor(config));
  const sound = report.findings.length === 0;
  console.log(output === "json" ? JSON.stringify({ ...report, sound }) : formatReport(report));
  return sound ? EXIT_OK : EXIT_FAILURE;
}
