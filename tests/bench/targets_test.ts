/**
 * How bench/pass_bench.ts judges a figure against the targets: the tier a count of
 * parents falls in, and the line that says whether and by how much a target is missed.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { judge, targetFor, verdictLine } from "../../bench/targets.ts";

Deno.test("a figure is held to the target of the smallest tier with as many parents, none beyond", () => {
  assertEquals([3, 10, 11, 100, 101, 1000].map((n) => targetFor("rss", n)), [
    64,
    64,
    80,
    80,
    120,
    120,
  ]);
  assertEquals(targetFor("cpuPerMinute", 5000), undefined);
});

Deno.test("a missed target says by how much; a met one says so; an unmeasured figure is n/a", () => {
  assertEquals(
    verdictLine(judge("cpuPerMinute", 10, 0.48), " (detail)"),
    "CPU per minute at rest: 0.480 s (detail) (target ≤ 0.320 s: MISSED by 0.160 s (1.5×))",
  );
  assertEquals(
    verdictLine(judge("rss", 100, 79.5)),
    "RSS of the daemon, max: 79.5 MiB (target ≤ 80.0 MiB: met)",
  );
  assertEquals(
    verdictLine(judge("apiRequestsPerMinute", 10, undefined)),
    "API requests per minute at rest: n/a (target ≤ 2.000/min)",
  );
  assertEquals(judge("firstPass", 2000, 40).missedBy, undefined);
});
