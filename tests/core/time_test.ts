/** RFC 3339 instants with nanosecond precision, as snapshots carry them. */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { formatInstant, parseInstant } from "../../lib/core/time.ts";

Deno.test("parse and format round trip in UTC, shortest exact fraction", () => {
  const table: [string, string][] = [
    ["2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z"],
    ["2026-01-01T00:00:00.500Z", "2026-01-01T00:00:00.5Z"],
    ["2026-01-01T00:00:00.123456789Z", "2026-01-01T00:00:00.123456789Z"],
    ["2026-01-01T01:30:00+01:30", "2026-01-01T00:00:00Z"],
    ["2025-12-31T23:00:00-01:00", "2026-01-01T00:00:00Z"],
    ["2024-02-29t12:00:00z", "2024-02-29T12:00:00Z"],
    ["1969-12-31T23:59:59.5Z", "1969-12-31T23:59:59.5Z"],
  ];
  for (const [input, output] of table) {
    const t = parseInstant(input);
    assertEquals(t === undefined ? undefined : formatInstant(t), output, input);
  }
});

Deno.test("not RFC 3339", () => {
  for (
    const bad of [
      "",
      "2026-01-01",
      "2026-01-01 00:00:00",
      "2026-01-01T00:00:00",
      "2026-13-01T00:00:00Z",
      "2026-02-29T00:00:00Z",
      "2026-01-01T24:00:00Z",
      "2026-01-01T00:60:00Z",
      "2026-01-01T00:00:60Z",
      "2026-01-01T00:00:00.Z",
      "2026-01-01T00:00:00.1234567890Z",
      "2026-01-01T00:00:00+25:00",
      "1767225600",
    ]
  ) {
    assertEquals(parseInstant(bad), undefined, bad);
  }
});
