/** Human-readable summaries of a pass, for `--once` and `--once --dry-run` in a terminal. */
import { type PassReport, RECORD_OPS } from "../pass/report.ts";
import type { Config } from "../config/types.ts";
import type { Lock } from "../disk/lock.ts";
import type { SourceName } from "../sources/types.ts";

const SOURCES: SourceName[] = ["apiserver", "kubelet", "runtime"];

function list(ids: string[]): string {
  return ids.length === 0 ? "-" : ids.join(", ");
}

/**
 * The plan's stops split in two: checkpoints written for the first time (a "stop" only in that
 * their manifest goes to the inactive dir; nothing ran) and copies that are withdrawn.
 */
function stopsOf(report: PassReport): { created: string[]; stopped: string[] } {
  const created = new Set(report.changes.filter((c) => c.from === "none").map((c) => c.id));
  return {
    created: report.plan.stops.filter((id) => created.has(id)),
    stopped: report.plan.stops.filter((id) => !created.has(id)),
  };
}

function sourcesLine(report: PassReport): string {
  return SOURCES.map((source) => {
    const failure = report.failures.find((f) => f.source === source);
    return `${source}: ${failure ? `${failure.kind} (${failure.message})` : "ok"}`;
  }).join("\n  ");
}

function stateCounts(report: PassReport): string {
  const counts = new Map<string, number>();
  for (const entry of Object.values(report.plan.state)) {
    counts.set(entry.state, (counts.get(entry.state) ?? 0) + 1);
  }
  const total = Object.keys(report.plan.state).length;
  const parts = [...counts].sort().map(([state, n]) => `${n} ${state}`);
  return `${total}${parts.length ? ` (${parts.join(", ")})` : ""}`;
}

export function formatPlan(report: PassReport, dryRun: boolean): string {
  const { created, stopped } = stopsOf(report);
  return [
    `ckpt-agent: ${dryRun ? "dry run, nothing written" : "plan"}; ${
      report.complete ? "every source answered" : "degraded"
    }`,
    `  ${sourcesLine(report)}`,
    `  start:  ${list(report.plan.starts)}`,
    `  new:    ${list(created)}`,
    `  stop:   ${list(stopped)}`,
    `  remove: ${list(report.plan.removes)}`,
    `  checkpoints: ${stateCounts(report)}`,
  ].join("\n");
}

export function formatPassReport(
  report: PassReport,
  config: Config,
  lock?: Pick<Lock, "held" | "problem">,
): string {
  const { created, stopped } = stopsOf(report);
  const lines = [
    `ckpt-agent: pass ${report.complete ? "complete" : "DEGRADED"} on ${config.nodeName} in ${
      Math.round(report.durationMs)
    } ms`,
    `  ${sourcesLine(report)}`,
    `  started: ${list(report.plan.starts)}`,
    `  new:     ${list(created)}`,
    `  stopped: ${list(stopped)}`,
    `  removed: ${list(report.plan.removes)}`,
    `  writes:  ${report.applied.length} change(s), ${report.bytesWritten} bytes written`,
    `  checkpoints: ${stateCounts(report)}`,
  ];
  for (const change of report.changes) {
    lines.push(`  ${change.id}: ${change.from} -> ${change.to} (${change.reason})`);
  }
  for (const error of report.errors) {
    lines.push(`  ERROR ${error.op} ${error.id ?? ""}: ${error.message}`);
  }
  const unrecorded = report.errors.filter((e) => (RECORD_OPS as readonly string[]).includes(e.op));
  if (unrecorded.length > 0) {
    lines.push(
      `  NOT RECORDED: ${unrecorded.length} record(s) in ${config.stateDir}; the next pass ` +
        "writes them (starting and stopping checkpoints does not wait for them)",
    );
  }
  if (lock && !lock.held) lines.push(`  NO LOCK: ${lock.problem}`);
  return lines.join("\n");
}
