/**
 * What `ckpt-agent doctor` reports: findings, each with a level, what was found and, unless all is
 * well, what to change. A check that could not look says so at warning level: doctor never says
 * "ok" about what it did not see.
 */
import type { SourceFailure } from "../sources/types.ts";

export type Level = "ok" | "warning" | "error";

/** The checks, in the order the report lists them. */
export const CHECKS = [
  "static-pod-dir",
  "directory",
  "mount",
  "disk-room",
  "unit",
  "source",
  "parent-network",
  "certificate",
  "clock",
] as const;

export type CheckName = (typeof CHECKS)[number];

export interface Finding {
  check: CheckName;
  level: Level;
  /** What the finding is about: a path, a source, a parent, a certificate. */
  subject: string;
  /** What was found. */
  found: string;
  /** What to change: the setting or flag, the file, the command. Absent when all is well. */
  fix?: string;
}

export function ok(check: CheckName, subject: string, found: string): Finding {
  return { check, level: "ok", subject, found };
}

export function warning(check: CheckName, subject: string, found: string, fix: string): Finding {
  return { check, level: "warning", subject, found, fix };
}

export function error(check: CheckName, subject: string, found: string, fix: string): Finding {
  return { check, level: "error", subject, found, fix };
}

const SEVERITY: Record<Level, number> = { ok: 0, warning: 1, error: 2 };

/** The worst level among the findings; "ok" for none. */
export function worstLevel(findings: readonly Finding[]): Level {
  return findings.reduce<Level>(
    (worst, f) => SEVERITY[f.level] > SEVERITY[worst] ? f.level : worst,
    "ok",
  );
}

export interface DoctorReport {
  /** The worst level found. */
  level: Level;
  /** How many findings of each level. */
  counts: Record<Level, number>;
  findings: Finding[];
}

export function doctorReport(findings: Finding[]): DoctorReport {
  const order = (f: Finding) => CHECKS.indexOf(f.check);
  const sorted = findings.toSorted((a, b) => order(a) - order(b));
  const counts = { ok: 0, warning: 0, error: 0 };
  for (const f of sorted) counts[f.level]++;
  return { level: worstLevel(sorted), counts, findings: sorted };
}

/**
 * Why something could not be read. Deno lets a program read /proc only with every permission,
 * which the compiled binary does not have: that is said in words an operator can act on.
 */
export function unreadableBecause(e: unknown): string {
  return e instanceof Deno.errors.NotCapable
    ? "the binary's permissions do not cover /proc, which Deno grants only with all permissions"
    : (e as Error).message;
}

/** A source's failure in a finding: its kind, then its message (which names what was asked). */
export function describeFailure(failure: SourceFailure): string {
  return `${failure.kind}: ${failure.message}`;
}
