/**
 * ProblemLog alone, on the test's clock: a problem said once when it starts and once when it
 * ends; each new way it fails said once while it lasts; at debug between; forgotten silently.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { ProblemLog } from "../../lib/pass/problem_log.ts";
import { LogCapture, ManualClock } from "../admin/harness.ts";

Deno.test("problem log: start at its level, debug while it lasts, a new way once, the end at info with how long", () => {
  const log = new LogCapture();
  const clock = new ManualClock();
  const problems = new ProblemLog(log.logger, clock, "thing works again");
  const failing = (what: string) =>
    problems.there("a", {
      level: "warn",
      msg: "thing failing",
      about: { thing: "a" },
      fields: { error: `${what} at ${clock.t}` },
      what,
    });
  for (const what of ["refused", "refused", "timeout", "refused", "timeout"]) {
    failing(what);
    clock.advance(30_000);
  }
  problems.there("b", { level: "error", msg: "b broken", about: { thing: "b" } });
  problems.settle(new Set(["b"]));
  problems.settle(new Set(["b"]));
  problems.retain((key) => key !== "b");
  problems.over("b");
  assertEquals(log.lines.map((l) => [l.level, l.msg, l.thing, l.for ?? l.lasted]), [
    ["warn", "thing failing", "a", undefined],
    ["debug", "thing failing", "a", "30s"],
    ["warn", "thing failing", "a", undefined],
    ["debug", "thing failing", "a", "1m30s"],
    ["debug", "thing failing", "a", "2m0s"],
    ["error", "b broken", "b", undefined],
    ["info", "thing works again", "a", "2m30s"],
  ]);
  assertEquals([problems.has("a"), problems.has("b")], [false, false]);
});
