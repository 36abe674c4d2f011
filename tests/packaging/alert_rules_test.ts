/**
 * prometheus/ckpt-agent.rules.yml: promtool accepts it; every alert has a severity, a summary and
 * a description that points somewhere; each alert has its own promtool test file
 * (tests/packaging/alert_rules/<alert>.test.yml) with a case that fires and a case that does not,
 * in which the alert was pending, so that only its `for:` keeps it quiet; those tests pass, and
 * fail once the `for:` is gone; and every metric and label the rules read is one a real daemon
 * exports; every runbook_url names a section of the docs; CkptAgentLoopStuck fires at the bound the
 * agent's own watchdog keeps.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { basename } from "node:path";
import { parse as parseYaml } from "yaml";
import { withTempDir } from "../helpers/temp_dir.ts";
import { parsePrometheusText } from "../admin/prom_text.ts";
import { withServedDaemon } from "../admin/harness.ts";
import { ALERT_RULES, REPO, run } from "./tools.ts";
import { defaultConfig } from "../../lib/config/load.ts";
import { loopAlive, passDeadlineMs, STALL_INTERVALS } from "../../lib/daemon/probes.ts";
import { formatDuration, parseDuration } from "../../lib/config/duration.ts";
import { millisToDuration } from "../../lib/core/time.ts";

const TESTS_DIR = `${REPO}/tests/packaging/alert_rules`;
const SEVERITIES = new Set(["warning", "critical"]);

/** Labels Prometheus gives every scraped series; the agent's metrics do not carry them. */
const TARGET_LABELS = new Set(["job", "instance"]);

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

async function rules(path = ALERT_RULES): Promise<Rule[]> {
  const file = parseYaml(await Deno.readTextFile(path)) as { groups: { rules: Rule[] }[] };
  return file.groups.flatMap((group) => group.rules);
}

interface PromtoolTest {
  name: string;
  input_series: { series: string; values: string }[];
  alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[];
  promql_expr_test?: { expr: string; exp_samples: { labels: string }[] }[];
}

interface PromtoolTestFile {
  rule_files: string[];
  tests: PromtoolTest[];
}

async function testFiles(): Promise<Map<string, PromtoolTestFile>> {
  const files = new Map<string, PromtoolTestFile>();
  for await (const entry of Deno.readDir(TESTS_DIR)) {
    assert(entry.name.endsWith(".test.yml"), entry.name);
    const path = `${TESTS_DIR}/${entry.name}`;
    files.set(path, parseYaml(await Deno.readTextFile(path)));
  }
  return files;
}

function alertOf(testFile: string): string {
  return basename(testFile, ".test.yml");
}

Deno.test("promtool check rules accepts the rules file", async () => {
  const r = await run("promtool", ["check", "rules", ALERT_RULES]);
  assertEquals(r.code, 0, r.stdout + r.stderr);
  assert(r.stdout.includes(`SUCCESS: ${(await rules()).length} rules found`), r.stdout);
});

Deno.test("every alert has a for:, a severity, a summary and a description that says where to look", async () => {
  const all = await rules();
  assert(all.length >= 10, `${all.length} rules`);
  for (const rule of all) {
    assert(rule.alert?.startsWith("CkptAgent"), JSON.stringify(rule));
    assert(/^\d+[smh]$/.test(rule.for ?? ""), `${rule.alert}: for: ${rule.for}`);
    assert(SEVERITIES.has(rule.labels?.severity ?? ""), `${rule.alert}: severity`);
    assertEquals(Object.keys(rule.annotations ?? {}).sort(), [
      "description",
      "runbook_url",
      "summary",
    ]);
    assert(rule.annotations!.description.includes("README"), `${rule.alert}: description`);
  }
  assertEquals(new Set(all.map((r) => r.alert)).size, all.length, "alert names are unique");
});

/** A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens. */
function headingAnchor(heading: string): string {
  return heading.toLowerCase().replace(/[^a-z0-9 _-]/g, "").replaceAll(" ", "-");
}

async function anchorsOf(doc: string): Promise<Set<string>> {
  const text = await Deno.readTextFile(`${REPO}/${doc}`);
  return new Set([
    ...[...text.matchAll(/^#+ (.+)$/gm)].map((m) => headingAnchor(m[1])),
    ...[...text.matchAll(/<a id="([^"]*)"><\/a>/g)].map((m) => m[1]),
  ]);
}

Deno.test("every runbook_url names a section of the docs, the section its description names", async () => {
  for (const rule of await rules()) {
    const url = rule.annotations!.runbook_url;
    const m = /^((?:docs\/)?[A-Za-z_]+\.md)#([a-z0-9_-]+)$/.exec(url);
    assert(m, `${rule.alert}: runbook_url ${url} is not a section of a document in the tree`);
    const [, doc, anchor] = m;
    assert((await anchorsOf(doc)).has(anchor), `${rule.alert}: ${doc} has no section #${anchor}`);
    const named = /README, "?([^".,]+)"?[.,]/.exec(rule.annotations!.description);
    assertEquals(
      named && `README.md#${headingAnchor(named[1])}`,
      url,
      `${rule.alert}: the description's section`,
    );
  }
});

Deno.test("CkptAgentLoopStuck fires once the loop is no longer alive, when the watchdog pings stop", async () => {
  const rule = (await rules()).find((r) => r.alert === "CkptAgentLoopStuck")!;
  const threshold =
    /^time\(\) - max_over_time\(ckpt_agent_last_pass_timestamp_seconds\[1h\]\) > (\d+)$/m
      .exec(rule.expr);
  assert(threshold, rule.expr);
  const firesAfterMs = Number(threshold[1]) * 1000 + parseDuration(rule.for!)!;
  // The longest a live loop goes without ending a pass: the next pass starts within
  // STALL_INTERVALS poll intervals of the last one's end, then may take passDeadlineMs.
  const config = defaultConfig("cp-1");
  const boundMs = STALL_INTERVALS * config.pollIntervalMs + passDeadlineMs(config);
  assertEquals(firesAfterMs, boundMs);
  const lastTick = 1_000_000_000_000n;
  const heartbeat = {
    lastTick,
    startedAt: 0n,
    pollIntervalMs: config.pollIntervalMs,
    passDeadlineMs: passDeadlineMs(config),
  };
  const passStartedAt = lastTick + millisToDuration(STALL_INTERVALS * config.pollIntervalMs);
  const at = (ms: number) => lastTick + millisToDuration(ms);
  assert(loopAlive(passStartedAt, heartbeat));
  assert(!loopAlive(passStartedAt + 1n, heartbeat), "no pass started that late is alive");
  assert(loopAlive(at(boundMs), { ...heartbeat, passStartedAt }));
  assert(!loopAlive(at(boundMs) + 1n, { ...heartbeat, passStartedAt }));
  // The summary says the bound.
  assert(
    rule.annotations!.summary.endsWith(`for ${formatDuration(boundMs)}`),
    rule.annotations!.summary,
  );
});

Deno.test("each alert has a test file with a case that fires and a pending case that does not", async () => {
  const files = await testFiles();
  assertEquals(
    [...files.keys()].map(alertOf).sort(),
    (await rules()).map((r) => r.alert!).sort(),
  );
  for (const [path, file] of files) {
    const alert = alertOf(path);
    assertEquals(file.rule_files, ["../../../prometheus/ckpt-agent.rules.yml"], path);
    const checks = file.tests.flatMap((t) => t.alert_rule_test ?? []);
    assert(checks.every((c) => c.alertname === alert), `${path}: tests only ${alert}`);
    const fires = file.tests.filter((t) =>
      (t.alert_rule_test ?? []).some((c) => c.exp_alerts.length > 0)
    );
    assert(fires.length > 0, `${path}: no case in which ${alert} fires`);
    const quiet = file.tests.filter((t) =>
      (t.alert_rule_test ?? []).every((c) => c.exp_alerts.length === 0) &&
      (t.promql_expr_test ?? []).some((e) =>
        e.expr === `ALERTS{alertname="${alert}"}` &&
        e.exp_samples.some((s) => s.labels.includes('alertstate="pending"'))
      )
    );
    assert(quiet.length > 0, `${path}: no case in which ${alert} is pending and does not fire`);
  }
});

Deno.test("promtool test rules passes every alert's tests", async () => {
  const paths = [...(await testFiles()).keys()].sort();
  const r = await run("promtool", ["test", "rules", ...paths]);
  assertEquals(r.code, 0, r.stdout + r.stderr);
  assertEquals(r.stdout.match(/^ {2}SUCCESS$/gm)?.length, paths.length, r.stdout);
});

Deno.test("each alert's tests fail when its for: is gone", async () => {
  // The pending case then fires: the tests see the for: duration, not only the expression.
  const text = await Deno.readTextFile(ALERT_RULES);
  await withTempDir(async (dir) => {
    // The copies keep their places relative to each other, as rule_files names the rules file.
    const rulesCopy = `${dir}/prometheus/ckpt-agent.rules.yml`;
    await Deno.mkdir(`${dir}/prometheus`);
    await Deno.mkdir(`${dir}/tests/packaging/alert_rules`, { recursive: true });
    for (const [path, file] of await testFiles()) {
      const alert = alertOf(path);
      const start = text.indexOf(`- alert: ${alert}\n`);
      const forLine = /\n {8}for: \S+\n/.exec(text.slice(start))!;
      const at = start + forLine.index;
      await Deno.writeTextFile(
        rulesCopy,
        `${text.slice(0, at)}\n        for: 0s\n${text.slice(at + forLine[0].length)}`,
      );
      assertEquals((await rules(rulesCopy)).find((r) => r.alert === alert)?.for, "0s");
      const testCopy = `${dir}/tests/packaging/alert_rules/${basename(path)}`;
      await Deno.writeTextFile(testCopy, JSON.stringify(file));
      const r = await run("promtool", ["test", "rules", testCopy]);
      const output = r.stdout + r.stderr;
      assert(r.code !== 0, `${alert}: its tests pass without its for:\n${output}`);
      assert(output.includes(`alertstate="firing"`), output);
    }
  });
});

/**
 * The agent's metrics a PromQL text selects, each with its label matchers (label, operator,
 * value). The rules write no space between a metric name and its braces.
 */
function selectors(expr: string): { name: string; matchers: [string, string, string][] }[] {
  const found = [];
  for (const m of expr.matchAll(/\b((?:ckpt_agent|process)_[a-zA-Z0-9_]+)(?:\{([^}]*)\})?/g)) {
    const matchers = [...(m[2] ?? "").matchAll(/(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"/g)]
      .map(([, label, op, value]) => [label, op, value] as [string, string, string]);
    found.push({ name: m[1], matchers });
  }
  return found;
}

Deno.test("every metric, label and label value the rules read is one a daemon exports", async () => {
  await withServedDaemon({}, async (f) => {
    const response = await f.request("/metrics");
    assertEquals(response.status, 200);
    const exported = parsePrometheusText(await response.text());
    const used = new Set<string>();
    for (const rule of await rules()) {
      // Annotations may query too.
      const promql = [rule.expr, ...Object.values(rule.annotations ?? {})].join("\n");
      for (const { name, matchers } of selectors(promql)) {
        used.add(name);
        const family = exported.get(name);
        assert(family, `${rule.alert}: ${name} is not exported`);
        for (const [label, op, value] of matchers) {
          if (TARGET_LABELS.has(label)) continue;
          assert(
            family.samples.every((s) => label in s.labels),
            `${rule.alert}: ${name} has no label ${label}`,
          );
          const values = new Set(family.samples.map((s) => s.labels[label]));
          assert(op === "=" || (op === "=~" && /^[a-z-]+(\|[a-z-]+)*$/.test(value)), op + value);
          for (const alternative of value.split("|")) {
            assert(values.has(alternative), `${rule.alert}: ${name}{${label}="${alternative}"}`);
          }
        }
      }
    }
    // The tests' series are the rules' metrics: a misspelt series would make a quiet case vacuous.
    for (const [path, file] of await testFiles()) {
      for (const test of file.tests) {
        for (const { series } of test.input_series) {
          const name = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(series)![0];
          assert(name === "up" || used.has(name), `${path}: series ${series}`);
        }
      }
    }
  });
});

Deno.test("the README lists every alert with its severity", async () => {
  const readme = await Deno.readTextFile(`${REPO}/README.md`);
  const listed = [...readme.matchAll(/^\| `(CkptAgent\w+)` +\| (\w+) +\|/gm)]
    .map(([, alert, severity]) => [alert, severity]);
  assertEquals(listed, (await rules()).map((r) => [r.alert, r.labels?.severity]));
});
