/**
 * How bench/pass_bench.ts judges a figure against the targets: the tier a count of
 * parents falls in, and the line that says whether and by how much a target is missed.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { judge, targetFor, verdictLine } from "../../bench/targets.ts";

Deno.test("a figure is held to the target of the smallest tier with as many parents, none beyond", () => {
  assertEquals([3, 10, 11, 100, 101, 1000].map((n) => targetFor("rss", n)), [
    82,
    82,
    115,
    115,
    120,
    120,
  ]);
  assertEquals(targetFor("cpuPerMinute", 5000), undefined);
});

Deno.test("a missed target says by how much; a met one says so; an unmeasured figure is n/a", () => {
  assertEquals(
    verdictLine(judge("cpuPerMinute", 10, 0.48), " (detail)"),
    "CPU per minute at rest: 0.480 s (detail) (target ≤ 0.160 s: MISSED by 0.320 s (3.0×))",
  );
  assertEquals(
    verdictLine(judge("rss", 100, 114.5)),
    "RSS of the daemon, max: 114.5 MiB (target ≤ 115.0 MiB: met)",
  );
  assertEquals(
    verdictLine(judge("apiRequestsPerMinute", 10, undefined)),
    "API requests per minute at rest: n/a (target ≤ 0.000/min)",
  );
  // A target of 0 missed: by how much, with no ratio.
  assertEquals(
    verdictLine(judge("apiRequestsPerMinute", 100, 3)),
    "API requests per minute at rest: 3.000/min (target ≤ 0.000/min: MISSED by 3.000/min)",
  );
  assertEquals(judge("firstPass", 2000, 40).missedBy, undefined);
});
