/**
 * The node's clock against the API server's Date header: what one answer can tell, given that
 * the header has whole seconds and the request took time.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import type { ServerTime } from "../../lib/sources/apiserver.ts";
import { failed, succeeded } from "../../lib/sources/types.ts";
import { clockFinding, clockOffsetBounds } from "../../lib/doctor/clock.ts";

const T = Date.parse("2026-06-01T12:00:00Z");

/** The node asked at `sent` and heard at `received` (ms after T); the server said T + `date`. */
function time(date: number, sent: number, received: number): ServerTime {
  return { dateMs: T + date, sentMs: T + sent, receivedMs: T + received, gitVersion: "v1.34.2" };
}

Deno.test("the offset's bounds allow for the header's whole seconds and the request's time", () => {
  // Asked at 0.2 s, heard at 0.5 s; the server's clock said 12:00:00.something.
  assertEquals(clockOffsetBounds(time(0, 200, 500)), { low: -500, high: 800 });
});

Deno.test("within 5 s is ok; beyond, a warning saying which way and by how much at least", () => {
  const cases: [ServerTime, string, string][] = [
    [time(0, 200, 500), "ok", "agrees with the API server (v1.34.2)'s Date within 5.0 s"],
    // The node is 4.7 s ahead at most: still within.
    [time(-5_000, 200, 300), "ok", "between -5.3 s and -4.2 s"],
    [time(10_000, 0, 100), "warning", "at least 9.9 s behind"],
    [time(-60_000, 0, 100), "warning", "at least 59.0 s ahead"],
    // An answer that took 20 s cannot tell 5 s apart.
    [time(0, 0, 20_000), "warning", "too long to tell"],
  ];
  for (const [t, level, said] of cases) {
    const finding = clockFinding(succeeded(t));
    assertEquals([finding.check, finding.level], ["clock", level], finding.found);
    assert(finding.found.includes(said), finding.found);
  }
  const behind = clockFinding(succeeded(time(10_000, 0, 100)));
  assert(behind.fix?.includes("synchronize the node's clock"), behind.fix);
});

Deno.test("an API server that does not answer leaves the clock unchecked, which is a warning", () => {
  const finding = clockFinding(failed("apiserver", "unreachable", "GET /version: refused"));
  assertEquals(finding.level, "warning");
  assertEquals(
    finding.found,
    "not checked: the API server's clock could not be read (unreachable: GET /version: refused)",
  );
});
