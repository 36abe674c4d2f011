/**
 * The text exposition format of lib/admin/exposition.ts: exact lines for each kind of family,
 * escaping, and promtool's own check of a whole exposition.
 */
import { deepStrictEqual as assertEquals, throws } from "node:assert/strict";
import { Counter, Gauge, Histogram, ReadOnScrape, Registry } from "../../lib/admin/exposition.ts";
import { parsePrometheusText, promtoolCheckMetrics, sampleValue } from "./prom_text.ts";

function sample(): Registry {
  const registers = [new Registry()];
  const requests = new Counter({
    name: "t_requests_total",
    help: "Requests.",
    labelNames: ["code"],
    registers,
  });
  requests.inc({ code: "200" });
  requests.inc({ code: "200" }, 2);
  requests.inc({ code: "500" }, 0);
  new Counter({ name: "t_unlabelled_total", help: "Starts at 0.", registers }).inc(0);
  new Counter({
    name: "t_none_total",
    help: "Labels, none given yet.",
    labelNames: ["op"],
    registers,
  });
  new Gauge({
    name: "t_temperature",
    help: 'Help with \\ and\nnewline and "quotes".',
    labelNames: ["room"],
    registers,
    collect() {
      this.reset();
      this.set({ room: 'a "b"\\c\nd' }, -1.5);
    },
  });
  const duration = new Histogram({
    name: "t_seconds",
    help: "Durations.",
    buckets: [1, 0.1],
    registers,
  });
  for (const value of [0.05, 0.1, 0.5, 7]) duration.observe(value);
  let cpu = 0;
  new ReadOnScrape({
    name: "t_cpu_seconds_total",
    help: "Read when scraped.",
    type: "counter",
    read: () => cpu += 1.25,
    registers,
  });
  new ReadOnScrape({
    name: "t_fds",
    help: "Unreadable: no sample.",
    type: "gauge",
    read: () => undefined,
    registers,
  });
  return registers[0];
}

Deno.test("each family: HELP, TYPE and its samples, in the order registered", async () => {
  assertEquals((await sample().metrics()).split("\n"), [
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
    "# HELP t_cpu_seconds_total Read when scraped.",
    "# TYPE t_cpu_seconds_total counter",
    "t_cpu_seconds_total 1.25",
    "",
    "# HELP t_fds Unreadable: no sample.",
    "# TYPE t_fds gauge",
    "",
  ]);
});

Deno.test("the tests' parser reads back what was written, escapes undone", async () => {
  const families = parsePrometheusText(await sample().metrics());
  assertEquals(sampleValue(families, "t_requests_total", { code: "200" }), 3);
  assertEquals(sampleValue(families, "t_temperature", { room: 'a "b"\\c\nd' }), -1.5);
});

Deno.test("promtool check metrics accepts the exposition", async () => {
  assertEquals(await promtoolCheckMetrics(await sample().metrics()), { code: 0, said: "" });
});

Deno.test("a counter does not go down; a gauge is set without labels; a name is registered once", async () => {
  const registers = [new Registry()];
  const counter = new Counter({ name: "t_total", help: "T.", registers });
  throws(() => counter.inc(-1), /only goes up/);
  counter.inc();
  counter.inc(2);
  const gauge = new Gauge({ name: "t_gauge", help: "G.", registers });
  gauge.set(4);
  assertEquals((await registers[0].metrics()).split("\n").filter((l) => !l.startsWith("#")), [
    "t_total 3",
    "",
    "t_gauge 4",
    "",
  ]);
  throws(() => new Gauge({ name: "t_total", help: "Again.", registers }), /registered twice/);
});
