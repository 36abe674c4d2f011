/**
 * What bench/pass_bench.ts holds the daemon to, at 10, 100 and 1,000 parents: half the CPU at
 * rest of the reference (bootkube's Go checkpointer, measured side by side on the same simulated
 * node), no API request at rest, RSS no higher than the daemon's own before its CPU work, and
 * failover within a second (two at 1,000) however the parent dies. The reference cannot be built
 * here (no Go module proxy), so its figures are stated, not measured: a figure is judged against
 * the target of the smallest tier with at least as many parents, and goes unjudged beyond the
 * largest.
 */

export type Figure =
  | "cpuPerMinute"
  | "rss"
  | "apiRequestsPerMinute"
  | "apiLossToActive"
  | "parentStopToActive"
  | "secretToFile"
  | "firstPass";

interface Target {
  what: string;
  unit: "s" | "MiB" | "/min";
  /** Upper bounds at 10, 100 and 1,000 parents. */
  at: [number, number, number];
}

export const TARGETS: Record<Figure, Target> = {
  cpuPerMinute: { what: "CPU per minute at rest", unit: "s", at: [0.16, 0.5, 2] },
  rss: { what: "RSS of the daemon, max", unit: "MiB", at: [82, 115, 120] },
  apiRequestsPerMinute: { what: "API requests per minute at rest", unit: "/min", at: [0, 0, 0] },
  apiLossToActive: {
    what: "API loss → active manifests durable, max of rounds",
    unit: "s",
    at: [1, 1, 2],
  },
  parentStopToActive: {
    what: "API loss, then a parent stopped at a random moment → its active manifest durable, max",
    unit: "s",
    at: [1, 1, 2],
  },
  secretToFile: { what: "secret change → stored file, max", unit: "s", at: [1, 1, 2] },
  firstPass: { what: "every parent checkpointed from an empty node", unit: "s", at: [2, 5, 30] },
};

const TIERS = [10, 100, 1000];

/** The bound for `parents`, or undefined beyond the largest tier. */
export function targetFor(figure: Figure, parents: number): number | undefined {
  const tier = TIERS.findIndex((t) => parents <= t);
  return tier < 0 ? undefined : TARGETS[figure].at[tier];
}

function format(value: number, unit: Target["unit"]): string {
  const digits = unit === "MiB" || value >= 100 ? 1 : value >= 10 ? 2 : 3;
  return `${value.toFixed(digits)}${unit === "/min" ? "/min" : ` ${unit}`}`;
}

/** How a figure compares to its target, for one line of the report. */
export interface Verdict {
  figure: Figure;
  /** Undefined: not measured (e.g. the simulated API server cannot count it yet). */
  value: number | undefined;
  target: number | undefined;
  /** Set when the target is missed: value − target, and value / target. */
  missedBy?: { by: number; times: number };
}

export function judge(figure: Figure, parents: number, value: number | undefined): Verdict {
  const target = targetFor(figure, parents);
  if (value === undefined || target === undefined || value <= target) {
    return { figure, value, target };
  }
  return { figure, value, target, missedBy: { by: value - target, times: value / target } };
}

/** `what: value (target ≤ x: met | MISSED by y, z×)`; `detail` goes after the value. */
export function verdictLine(v: Verdict, detail = ""): string {
  const { what, unit } = TARGETS[v.figure];
  const value = v.value === undefined ? "n/a" : format(v.value, unit);
  const target = v.target === undefined ? "no target" : `target ≤ ${format(v.target, unit)}`;
  const outcome = v.value === undefined || v.target === undefined
    ? ""
    : v.missedBy
    ? `: MISSED by ${format(v.missedBy.by, unit)}${
      Number.isFinite(v.missedBy.times) ? ` (${v.missedBy.times.toFixed(1)}×)` : ""
    }`
    : ": met";
  return `${what}: ${value}${detail} (${target}${outcome})`;
}
