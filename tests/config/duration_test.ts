/** Go-style durations: the texts the original checkpointer's flags accepted, and Go's output. */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { formatDuration, parseDuration } from "../../lib/config/duration.ts";

Deno.test("parses Go durations into milliseconds", () => {
  const table: [string, number][] = [
    ["0", 0],
    ["0s", 0],
    ["90s", 90_000],
    ["1m30s", 90_000],
    ["500ms", 500],
    ["2h", 7_200_000],
    ["1.5s", 1_500],
    [".5s", 500],
    ["1.s", 1_000],
    ["1h2m3s4ms", 3_723_004],
    ["1500us", 1.5],
    ["1500\u00b5s", 1.5],
    ["1500\u03bcs", 1.5],
    ["2000000ns", 2],
    ["+5s", 5_000],
    ["-5s", -5_000],
    ["1m1m", 120_000],
  ];
  for (const [text, ms] of table) assertEquals(parseDuration(text), ms, text);
});

Deno.test("rejects what Go's time.ParseDuration rejects", () => {
  for (
    const text of ["", "5", "1.5", "s", ".s", ".", "5 s", " 5s", "5S", "5d", "1m-30s", "-", "1e3s"]
  ) {
    assertEquals(parseDuration(text), undefined, text);
  }
  // Beyond int64 nanoseconds, as in Go.
  assertEquals(parseDuration("2562048h"), undefined);
});

Deno.test("formats as Go's Duration.String", () => {
  const table: [number, string][] = [
    [0, "0s"],
    [0.000_001, "1ns"],
    [0.0015, "1.5\u00b5s"],
    [1.5, "1.5ms"],
    [500, "500ms"],
    [1_000, "1s"],
    [1_500, "1.5s"],
    [60_000, "1m0s"],
    [90_000, "1m30s"],
    [120_000, "2m0s"],
    [7_200_000, "2h0m0s"],
    [3_723_004, "1h2m3.004s"],
    [-90_000, "-1m30s"],
  ];
  for (const [ms, text] of table) assertEquals(formatDuration(ms), text, String(ms));
});

Deno.test("formatting then parsing gives the same duration", () => {
  for (const ms of [0, 0.25, 1, 999, 1_001, 59_999, 61_000, 86_400_000, 123_456_789]) {
    assertEquals(parseDuration(formatDuration(ms)), ms, String(ms));
  }
});
