/**
 * The log's lines: text with well-defined quoting, always one line a record; JSON; the level
 * setting; and the syslog priority each line starts with when stderr is the journal's stream,
 * checked through the real command with JOURNAL_STREAM naming its stderr (a file), since
 * systemd cannot run here.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { createLogger, type LoggerOptions, textValue } from "../../lib/util/log.ts";
import { runCli } from "../helpers/cli.ts";
import { withNode } from "../helpers/sim_node.ts";
import { withTempDir } from "../helpers/temp_dir.ts";
import { agentDenoFlags } from "../../scripts/permissions.ts";

const NOW = new Date("2026-12-07T20:00:00.000Z");

function written(opts: LoggerOptions, say: (log: ReturnType<typeof createLogger>) => void) {
  const lines: string[] = [];
  say(createLogger({ now: () => NOW, write: (line) => lines.push(line), ...opts }));
  return lines;
}

Deno.test("text: time, level, message, then key=value, quoted only when the value needs it", () => {
  const lines = written({ format: "text", minLevel: "debug" }, (log) => {
    log.warn("volume files kept as they were", {
      id: "kube-system/kube-apiserver-7x2kq",
      reason: "secret kube-apiserver not found",
      count: 3,
      optional: false,
      none: null,
      left: undefined,
      error: new Error("EACCES: permission denied"),
      version: 12n,
    });
    log.debug("pass", { reasons: ["apiserver lost"], plan: { starts: 1 } });
  });
  assertEquals(lines, [
    "2026-12-07T20:00:00.000Z WARN  volume files kept as they were " +
    'id=kube-system/kube-apiserver-7x2kq reason="secret kube-apiserver not found" count=3 ' +
    'optional=false none=null error="EACCES: permission denied" version=12',
    '2026-12-07T20:00:00.000Z DEBUG pass reasons="[\\"apiserver lost\\"]" plan="{\\"starts\\":1}"',
  ]);
});

Deno.test("text: what would end the value or the line is quoted and escaped as JSON escapes it", () => {
  const cases: [unknown, string][] = [
    ["plain", "plain"],
    ["", '""'],
    ["two words", '"two words"'],
    ['say "hi"', '"say \\"hi\\""'],
    ["a=b", '"a=b"'],
    ["C:\\dir", '"C:\\\\dir"'],
    ["line\nbreak", '"line\\nbreak"'],
    ["tab\there", '"tab\\there"'],
    ["cr\r", '"cr\\r"'],
    ["sep\u2028par\u2029", '"sep\\u2028par\\u2029"'],
    ["bell\u0007", '"bell\\u0007"'],
    ["ünïcode/ok:1", "ünïcode/ok:1"],
    [1.5, "1.5"],
    [true, "true"],
    [null, "null"],
  ];
  assertEquals(cases.map(([value]) => textValue(value)), cases.map(([, text]) => text));
});

Deno.test("text: a record is always one line, whatever its message, keys and values hold", () => {
  const lines = written({ format: "text" }, (log) => {
    log.error("first line\nsecond \u2028 line", { "bad key\n=": "x\ny", nested: { a: "b\nc" } });
  });
  assertEquals(lines.length, 1);
  assert(!/[\n\r\u2028\u2029]/.test(lines[0]), lines[0]);
  assertEquals(
    lines[0],
    '2026-12-07T20:00:00.000Z ERROR first line\\nsecond \\u2028 line bad_key__="x\\ny" ' +
      'nested="{\\"a\\":\\"b\\\\nc\\"}"',
  );
});

Deno.test("json: one object a line, time, level and msg first; the level setting drops what is below it", () => {
  const lines = written({ minLevel: "warn" }, (log) => {
    log.debug("not said");
    log.info("not said");
    log.warn("said", { n: 1n });
    log.error("also said", { error: new Error("boom") });
  });
  assertEquals(lines.map((l) => JSON.parse(l)), [
    { time: NOW.toISOString(), level: "warn", msg: "said", n: "1" },
    { time: NOW.toISOString(), level: "error", msg: "also said", error: "boom" },
  ]);
});

Deno.test("priorities: each line starts with its syslog priority, in either format", () => {
  const say = (log: ReturnType<typeof createLogger>) => {
    log.error("e");
    log.warn("w");
    log.info("i");
    log.debug("d");
  };
  assertEquals(written({ minLevel: "debug", priorities: true, format: "text", time: false }, say), [
    "<3>ERROR e",
    "<4>WARN  w",
    "<6>INFO  i",
    "<7>DEBUG d",
  ]);
  const json = written({ minLevel: "debug", priorities: true }, say);
  assertEquals(json.map((l) => l.slice(0, 4)), ["<3>{", "<4>{", "<6>{", "<7>{"]);
});

/**
 * `ckpt-agent --once --dry-run` with the binary's flags during an outage, after a pass made checkpoints, its stderr a file, JOURNAL_STREAM as systemd
 * would set it (or naming another file, as a shell that redirected stderr would inherit it).
 */
async function dryRunOutage(
  journalStream: (log: Deno.FileInfo, other: Deno.FileInfo) => string,
  flags: string[] = [],
): Promise<string[]> {
  let lines: string[] = [];
  await withNode(async (node, config) => {
    await withTempDir(async (dir) => {
      const logFile = join(dir, "stderr"), other = join(dir, "other");
      await Deno.writeTextFile(logFile, "");
      await Deno.writeTextFile(other, "");
      // Checkpoints first, which the dry run would activate.
      assertEquals((await runCli(["--once", "--config", config])).code, 0);
      await node.loseControlPlane();
      // With the binary's own permissions, under which Deno refuses every read of /proc.
      const r = await runCli(["--once", "--dry-run", "--config", config, ...flags], {
        denoFlags: agentDenoFlags(),
        env: { JOURNAL_STREAM: journalStream(await Deno.stat(logFile), await Deno.stat(other)) },
        wrapper: ["/bin/sh", "-c", 'exec "$@" 2>>"$0"', logFile],
      });
      assertEquals(r.code, 1, r.stdout);
      lines = (await Deno.readTextFile(logFile)).trimEnd().split("\n");
    });
  });
  return lines;
}

const stream = (file: Deno.FileInfo) => `${file.dev}:${file.ino}`;

Deno.test("journal: with stderr the stream JOURNAL_STREAM names, text lines with their priority and no time", async () => {
  const lines = await dryRunOutage((log) => stream(log));
  assert(lines.length > 0);
  for (const line of lines) assert(/^<[3467]>(ERROR|WARN |INFO |DEBUG) /.test(line), line);
  assert(
    lines.some((l) => l.startsWith("<4>WARN  source unavailable source=apiserver kind=")),
    lines.join("\n"),
  );
  // A dry run changes nothing, and says no state change, though it plans some.
  assertEquals(lines.filter((l) => l.includes("state change")), []);
});

Deno.test("journal: --log-format json there keeps the priorities; another stream than stderr's is no journal", async () => {
  const json = await dryRunOutage((log) => stream(log), ["--log-format", "json"]);
  assert(json.some((l) => l.startsWith("<4>{")), json.join("\n"));
  for (const line of json) JSON.parse(line.replace(/^<\d>/, ""));
  const redirected = await dryRunOutage((_, other) => stream(other));
  for (const line of redirected) assert(line.startsWith("{"), line);
  assert(redirected.some((l) => JSON.parse(l).level === "warn"), redirected.join("\n"));
});

Deno.test("the unit leaves stderr to the journal and SyslogLevelPrefix= at its default, yes", async () => {
  const unit = await Deno.readTextFile(
    new URL("../../systemd/ckpt-agent.service", import.meta.url),
  );
  const settings = unit.split("\n").filter((l) => !l.startsWith("#"));
  assertEquals(
    settings.filter((l) => /^(SyslogLevelPrefix|StandardError|LogLevelMax)=/.test(l)),
    [],
  );
});
