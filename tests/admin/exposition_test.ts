/**
 * The text exposition format of lib/admin/exposition.ts: exact lines for each kind of family,
 * escaping, and promtool's own check of a whole exposition.
 */
import { deepStrictEqual as assertEquals, ok as assert, throws } from "node:assert/strict";
import { Counter, Exposition, Gauge, Histogram } from "../../lib/admin/exposition.ts";
import { parsePrometheusText, sampleValue } from "./prom_text.ts";

function sample(): Exposition {
  const exposition = new Exposition();
  const requests = exposition.register(new Counter("t_requests_total", "Requests.", ["code"]));
  requests.inc({ code: "200" });
  requests.inc({ code: "200" }, 2);
  requests.inc({ code: "500" }, 0);
  exposition.register(new Counter("t_unlabelled_total", "Starts at 0."));
  exposition.register(new Counter("t_none_total", "Labels, none given yet.", ["op"]));
  exposition.register(
    new Gauge("t_temperature", 'Help with \\ and\nnewline and "quotes".', ["room"], (g) => {
      g.reset();
      g.set({ room: 'a "b"\\c\nd' }, -1.5);
    }),
  );
  const duration = exposition.register(new Histogram("t_seconds", "Durations.", [1, 0.1]));
  for (const value of [0.05, 0.1, 0.5, 7]) duration.observe(value);
  return exposition;
}

Deno.test("each family: HELP, TYPE and its samples, in the order registered", () => {
  assertEquals(sample().text().split("\n"), [
    "# HELP t_requests_total Requests.",
    "# TYPE t_requests_total counter",
    't_requests_total{code="200"} 3',
    't_requests_total{code="500"} 0',
    "",
    "# HELP t_unlabelled_total Starts at 0.",
    "# TYPE t_unlabelled_total counter",
    "t_unlabelled_total 0",
    "",
    "# HELP t_none_total Labels, none given yet.",
    "# TYPE t_none_total counter",
    "",
    '# HELP t_temperature Help with \\\\ and\\nnewline and "quotes".',
    "# TYPE t_temperature gauge",
    't_temperature{room="a \\"b\\"\\\\c\\nd"} -1.5',
    "",
    "# HELP t_seconds Durations.",
    "# TYPE t_seconds histogram",
    't_seconds_bucket{le="0.1"} 2',
    't_seconds_bucket{le="1"} 3',
    't_seconds_bucket{le="+Inf"} 4',
    "t_seconds_sum 7.65",
    "t_seconds_count 4",
    "",
  ]);
});

Deno.test("the tests' parser reads back what was written, escapes undone", () => {
  const families = parsePrometheusText(sample().text());
  assertEquals(sampleValue(families, "t_requests_total", { code: "200" }), 3);
  assertEquals(sampleValue(families, "t_temperature", { room: 'a "b"\\c\nd' }), -1.5);
});

Deno.test("promtool check metrics accepts the exposition", async () => {
  const child = new Deno.Command("promtool", {
    args: ["check", "metrics"],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(sample().text()));
  await writer.close();
  const out = await child.output();
  const said = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  assert(out.success, said);
});

Deno.test("a counter does not go down, and a name is registered once", () => {
  const exposition = new Exposition();
  const counter = exposition.register(new Counter("t_total", "T."));
  throws(() => counter.inc({}, -1), /only goes up/);
  throws(() => exposition.register(new Gauge("t_total", "Again.")), /registered twice/);
});
