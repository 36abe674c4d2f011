/**
 * `ckpt-agent doctor [--config FILE] [flags] [--output json]`: a preflight for installs and
 * runbooks (lib/doctor/). Exit 0 when all is well, 1 on warnings, 2 on errors, as for a
 * configuration that cannot be loaded. The unit files are looked for where `$SYSTEMD_UNIT_PATH`
 * says, as systemd does.
 */
import { commandOptions, commandOutput } from "../cli/commands.ts";
import { EXIT_ERRORS, EXIT_FAILURE, EXIT_OK } from "../cli/errors.ts";
import { loadConfig } from "../config/load.ts";
import { runDoctor } from "../doctor/doctor.ts";
import type { DoctorReport, Level } from "../doctor/finding.ts";
import { unitSearchPath } from "../doctor/systemd_unit.ts";

const EXIT_STATUS: Record<Level, number> = {
  ok: EXIT_OK,
  warning: EXIT_FAILURE,
  error: EXIT_ERRORS,
};

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

export function formatDoctorReport(report: DoctorReport): string {
  const lines: string[] = [];
  for (const f of report.findings) {
    lines.push(`${f.level.padEnd(7)}  ${f.check}: ${f.found}`);
    if (f.fix !== undefined) lines.push(`${" ".repeat(9)}fix: ${f.fix}`);
  }
  const { ok, warning, error } = report.counts;
  lines.push(`${plural(error, "error")}, ${plural(warning, "warning")}, ${ok} ok`);
  return lines.join("\n");
}

export async function doctorCommand(args: string[]): Promise<number> {
  const { config, extra } = await loadConfig(args, { extraFlags: commandOptions("doctor") });
  const output = commandOutput("doctor", extra);
  const report = await runDoctor(config, {
    unitSearchPath: unitSearchPath(Deno.env.get("SYSTEMD_UNIT_PATH")),
  });
  console.log(output === "json" ? JSON.stringify(report) : formatDoctorReport(report));
  return EXIT_STATUS[report.level];
}
