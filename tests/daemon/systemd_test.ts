/**
 * The daemon's systemd notifications (lib/daemon/systemd.ts) in process, into a real unix datagram
 * socket: READY=1 after the first pass, STATUS= when it changes, WATCHDOG=1 only while the loop is
 * alive — stopped for real by a pass hung on the API server, judged on the test's clock — and
 * STOPPING=1; and the environment systemd passes, read as sd_notify(3) reads it.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { formatDuration, parseDuration } from "../../lib/config/duration.ts";
import { defaultConfig } from "../../lib/config/load.ts";
import { passDeadlineMs, STALL_INTERVALS } from "../../lib/daemon/probes.ts";
import {
  DEFAULT_WATCHDOG_MS,
  type Every,
  STATUS_ORDER,
  statusLine,
  type SystemdEnv,
  SystemdNotifier,
  watchdogMs,
} from "../../lib/daemon/systemd.ts";
import { notifyAddress } from "../../lib/daemon/notify_socket.ts";
import type { PassReport } from "../../lib/pass/report.ts";
import { STATUS_STATES } from "../../lib/store/status_record.ts";
import { DaemonFixture, LogCapture } from "../admin/harness.ts";
import { abstractName, NotifyInbox } from "../helpers/notify_inbox.ts";

/** The keep-alive timer, driven by the test. */
class ManualTimer {
  ticks = 0;
  #fn?: () => void;
  intervalMs?: number;
  readonly every: Every = (ms, fn) => {
    this.intervalMs = ms;
    this.#fn = fn;
    return () => this.#fn = undefined;
  };
  get running(): boolean {
    return this.#fn !== undefined;
  }
}

async function withNotifiedDaemon(
  opts: { config?: Parameters<typeof DaemonFixture.start>[0]; env?: SystemdEnv; at?: string },
  fn: (
    f: DaemonFixture,
    notifier: SystemdNotifier,
    inbox: NotifyInbox,
    timer: ManualTimer,
  ) => Promise<void>,
) {
  const f = await DaemonFixture.start(opts.config);
  const inbox = new NotifyInbox(opts.at ?? join(f.node.root, "run/notify.sock"));
  const timer = new ManualTimer();
  try {
    const notifier = SystemdNotifier.start({
      daemon: f.daemon,
      env: { NOTIFY_SOCKET: inbox.address, WATCHDOG_USEC: "3000000", ...opts.env },
      pid: Deno.pid,
      log: f.log.logger,
      every: timer.every,
    })!;
    try {
      await fn(f, notifier, inbox, timer);
    } finally {
      await notifier.close();
    }
  } finally {
    await inbox.close();
    await f.close();
  }
}

/** Everything the notifier has sent since the last look. */
async function sent(notifier: SystemdNotifier, inbox: NotifyInbox): Promise<string[]> {
  await notifier.flushed();
  return await inbox.since();
}

/** One tick of the keep-alive timer, and what it sent. */
async function tick(notifier: SystemdNotifier, inbox: NotifyInbox): Promise<string[]> {
  await notifier.keepAlive();
  return await sent(notifier, inbox);
}

Deno.test("systemd: READY=1 after the first pass, STATUS= when it changes, WATCHDOG=1 each tick, STOPPING=1", async () => {
  await withNotifiedDaemon({}, async (f, notifier, inbox, timer) => {
    assertEquals(timer.intervalMs, 1_000, "a third of WATCHDOG_USEC");
    // Starting: once the start is slow, the start timeout is extended by one watchdog period
    // while the loop is alive.
    assertEquals(await tick(notifier, inbox), []);
    f.clock.advance(3_000);
    assertEquals(await tick(notifier, inbox), ["EXTEND_TIMEOUT_USEC=3000000"]);
    await f.pass();
    assertEquals(await sent(notifier, inbox), ["READY=1", "STATUS=3 inactive", "WATCHDOG=1"]);
    assertEquals(await tick(notifier, inbox), ["WATCHDOG=1"]);
    // systemd keeps the last STATUS=: a pass that leaves the line as it was sends nothing.
    await f.pass();
    assertEquals(await sent(notifier, inbox), []);
    await f.node.loseControlPlane();
    await f.pass();
    assertEquals(await sent(notifier, inbox), [
      "STATUS=3 active; apiserver unreachable, kubelet forbidden",
    ]);
    notifier.stopping();
    assertEquals(await sent(notifier, inbox), ["STOPPING=1"]);
    assert(!timer.running, "no more pings once stopping");
    // A pass that ends while the daemon stops tells systemd nothing more.
    await f.pass();
    assertEquals(await tick(notifier, inbox), []);
  });
});

Deno.test("systemd: a pass hung on a peer past its deadline stops the pings, which resume when it ends", async () => {
  const hourMs = 3_600_000;
  await withNotifiedDaemon({ config: { apiTimeoutMs: hourMs } }, async (f, notifier, inbox) => {
    await f.pass();
    assertEquals(await sent(notifier, inbox), ["READY=1", "STATUS=3 inactive", "WATCHDOG=1"]);

    // The API server accepts the next list and never answers: the pass waits for real.
    f.node.apiServer.setFault("hang");
    const asked = f.node.apiServer.requests.length;
    const hung = f.daemon.runPass();
    for (let i = 0; i < 1_000 && f.node.apiServer.requests.length === asked; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assert(f.node.apiServer.requests.length > asked, "the pass asked the API server");
    // Waiting on a peer within the pass's deadline is alive.
    f.clock.advance(passDeadlineMs(f.config));
    assertEquals(await tick(notifier, inbox), ["WATCHDOG=1"]);

    // Past it: stalled. No ping, however often the timer fires.
    f.clock.advance(1);
    assertEquals(await tick(notifier, inbox), []);
    assertEquals(await tick(notifier, inbox), []);
    assertEquals(f.log.find("systemd: the loop has stalled; watchdog pings stopped").length, 1);

    // The API server goes away: the pass ends (degraded), and the pings resume.
    await f.node.apiServer.stopListening();
    const report = await hung;
    assertEquals(report.complete, false);
    assertEquals(await sent(notifier, inbox), [
      "STATUS=3 inactive; apiserver unreachable",
    ]);
    assertEquals(await tick(notifier, inbox), ["WATCHDOG=1"]);
    assertEquals(f.log.find("systemd: the loop goes on again; watchdog pings resumed").length, 1);

    // Between passes, the loop is stalled once the next pass is overdue.
    f.clock.advance(STALL_INTERVALS * f.config.pollIntervalMs);
    assertEquals(await tick(notifier, inbox), ["WATCHDOG=1"]);
    f.clock.advance(1);
    assertEquals(await tick(notifier, inbox), []);
    await f.daemon.runPass();
    assertEquals((await tick(notifier, inbox)).slice(-1), ["WATCHDOG=1"]);
  });
});

Deno.test("systemd: an abstract socket (@name); a period of microseconds does not spin the timer", async () => {
  const env = { WATCHDOG_USEC: "3" };
  await withNotifiedDaemon({ at: abstractName(), env }, async (f, notifier, inbox, timer) => {
    assertEquals(timer.intervalMs, 10);
    await f.pass();
    assertEquals(await sent(notifier, inbox), ["READY=1", "STATUS=3 inactive", "WATCHDOG=1"]);
  });
});

Deno.test("systemd: a socket nobody reads is said once at warn, and the daemon goes on", async () => {
  const f = await DaemonFixture.start();
  try {
    const notifier = SystemdNotifier.start({
      daemon: f.daemon,
      env: { NOTIFY_SOCKET: join(f.node.root, "run/nobody.sock") },
      pid: Deno.pid,
      log: f.log.logger,
      every: new ManualTimer().every,
    })!;
    await f.pass();
    await f.pass();
    await notifier.keepAlive();
    await notifier.close();
    const warned = f.log.lines.filter((l) => l.level === "warn" && l.msg.startsWith("systemd:"));
    assertEquals(warned.map((l) => [l.msg, l.message]), [
      ["systemd: notification not sent; systemd may restart the agent", "READY=1"],
    ]);
    assert(String(warned[0].error).includes("No such file"), String(warned[0].error));
    assertEquals(f.daemon.lastReport?.complete, true);
  } finally {
    await f.close();
  }
});

Deno.test("systemd: without NOTIFY_SOCKET nothing is set up and nothing is said", async () => {
  const f = await DaemonFixture.start();
  try {
    for (const env of [{}, { NOTIFY_SOCKET: "" }, { WATCHDOG_USEC: "30000000" }]) {
      const timer = new ManualTimer();
      const none = SystemdNotifier.start({
        daemon: f.daemon,
        env,
        pid: Deno.pid,
        log: f.log.logger,
        every: timer.every,
      });
      assertEquals([none, timer.running], [undefined, false]);
    }
    await f.pass();
    assertEquals(f.log.lines.filter((l) => l.msg.startsWith("systemd:")), []);
  } finally {
    await f.close();
  }
});

Deno.test("NOTIFY_SOCKET: a path or an abstract name; anything else is said and not used", () => {
  assertEquals(notifyAddress("/run/systemd/notify"), {
    path: "/run/systemd/notify",
    shown: "/run/systemd/notify",
  });
  assertEquals(notifyAddress("@sd-notify"), { path: "\0sd-notify", shown: "@sd-notify" });
  for (const value of ["vsock:2:1234", "run/notify", "@"]) {
    assert("problem" in notifyAddress(value), value);
  }
  const log = new LogCapture();
  assertEquals(
    SystemdNotifier.start({
      daemon: undefined as never,
      env: { NOTIFY_SOCKET: "vsock:2:1234" },
      pid: 1,
      log: log.logger,
    }),
    undefined,
  );
  assertEquals(log.lines.map((l) => [l.level, l.msg]), [["warn", "systemd: not notified"]]);
});

Deno.test("WATCHDOG_USEC: the period when it is for this process, else the unit's default", () => {
  const log = new LogCapture();
  const ms = (env: SystemdEnv) => watchdogMs(env, 4242, log.logger);
  assertEquals(ms({}), DEFAULT_WATCHDOG_MS);
  assertEquals(ms({ WATCHDOG_USEC: "20000000" }), 20_000);
  assertEquals(ms({ WATCHDOG_USEC: "20000000", WATCHDOG_PID: "4242" }), 20_000);
  assertEquals(ms({ WATCHDOG_USEC: "20000000", WATCHDOG_PID: "1" }), DEFAULT_WATCHDOG_MS);
  assertEquals(log.lines, []);
  for (const bad of ["", "0", "-5", "30s", "1e9"]) {
    assertEquals(ms({ WATCHDOG_USEC: bad }), DEFAULT_WATCHDOG_MS, bad);
  }
  assertEquals(log.lines.length, 5);
});

Deno.test("STATUS: checkpoints by state, copies first; crash-looping parents; failed sources and writes; stalled starts; why not ready", () => {
  const report = (over: Partial<PassReport>) =>
    ({
      failures: [],
      errors: [],
      stalledStarts: [],
      crashLooping: {},
      ...over,
    }) as unknown as PassReport;
  assertEquals([...STATUS_ORDER].sort(), [...STATUS_STATES].sort());
  assertEquals(statusLine([], report({}), []), "no checkpoints");
  assertEquals(
    statusLine(["inactive", "active", "active", "inactive-grace"], report({}), []),
    "2 active, 1 inactive-grace, 1 inactive",
  );
  assertEquals(
    statusLine(
      ["active"],
      report({
        failures: [{ source: "apiserver", kind: "unreachable", message: "" }],
        errors: [{ op: "status", message: "" }],
        stalledStarts: [{ id: "a/b", activeSince: "", copy: "" }],
      }),
      ["stalled-start"],
    ),
    "1 active; apiserver unreachable, 1 write(s) failed; 1 stalled start",
  );
  // Why a copy runs while the API server answers.
  assertEquals(
    statusLine(["active", "inactive"], report({ crashLooping: { "kube-system/a": 1 } }), []),
    "1 active, 1 inactive; 1 parent crash-looping",
  );
  assertEquals(
    statusLine(
      ["active", "active"],
      report({
        crashLooping: { "kube-system/a": 1, "kube-system/b": 3 },
        failures: [{ source: "apiserver", kind: "unreachable", message: "" }],
      }),
      [],
    ),
    "2 active; 2 parents crash-looping; apiserver unreachable",
  );
  assertEquals(
    statusLine(["inactive"], report({}), ["static-pod-dir", "secrets-dir"]),
    "1 inactive; not ready: static-pod-dir, secrets-dir",
  );
});

Deno.test("the unit is Type=notify, only the agent may notify, and its WatchdogSec= is the default period", async () => {
  const unit = await Deno.readTextFile(
    new URL("../../systemd/ckpt-agent.service", import.meta.url),
  );
  const value = (key: string) =>
    unit.split("\n").filter((line) => line.startsWith(`${key}=`)).map((l) =>
      l.slice(key.length + 1)
    );
  assertEquals(value("Type"), ["notify"]);
  assertEquals(value("NotifyAccess"), ["main"]);
  assertEquals(value("WatchdogSec").map(parseDuration), [DEFAULT_WATCHDOG_MS]);
  // The start timeout is extended while the loop is alive, so it is left at its default.
  assertEquals(value("TimeoutStartSec"), []);
});

Deno.test("a pass may wait on its peers' deadlines for 7m10s with the default timeouts (the docs say so)", () => {
  const config = defaultConfig("cp-1");
  assertEquals(formatDuration(passDeadlineMs(config)), "7m10s");
  // Longer timeouts, a longer bound: the watchdog never kills a pass for waiting on them.
  const slow = { ...config, runtimeRequestTimeoutMs: 10 * 60_000 };
  assert(passDeadlineMs(slow) > 3 * slow.runtimeRequestTimeoutMs);
});
