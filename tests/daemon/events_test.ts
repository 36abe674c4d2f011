/**
 * The real daemon's loop on a simulated node, with a poll interval of an hour so that only events
 * run passes: a change told on the sources' feed, a manifest removed from the static-pod dir, a
 * grace deadline (on the test's clock and timers), an admin request; a pass hung on a peer is not
 * made to look alive by the events behind it; and the loop stops cleanly.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { type Config } from "../../lib/config/types.ts";
import { formatInstant, millisToDuration, parseInstant } from "../../lib/core/time.ts";
import { passDeadlineMs } from "../../lib/daemon/probes.ts";
import { MAX_SPACING_MS, MIN_SPACING_MS, type PassCause } from "../../lib/daemon/pass_scheduler.ts";
import { OUTAGE_POLL_MS } from "../../lib/daemon/daemon.ts";
import type { PassReport } from "../../lib/pass/report.ts";
import type { SimNode } from "../../lib/sim/node.ts";
import { API_BACK, API_LOST, ChangeFanout } from "../../lib/sources/changes.ts";
import { DaemonFixture, type ManualClock } from "../admin/harness.ts";
import { ManualTimers } from "../helpers/manual_timers.ts";

const HOUR_MS = 3_600_000;
const APISERVER = "kube-system/kube-apiserver-7x2kq";

/**
 * The checkpoints written before the loop watches their dirs: the loop's first pass then writes
 * nothing there, and no event of the agent's own mixes with those a test makes.
 */
const checkpointed = async (f: DaemonFixture) => void await f.pass();

interface Looping {
  f: DaemonFixture;
  feed: ChangeFanout;
  timers?: ManualTimers;
  passes: { report: PassReport; cause: PassCause }[];
  /** Waits (bounded, in real time) for a pass after the `after`th that `matches`. */
  until(
    matches: (report: PassReport, cause: PassCause) => boolean,
    after?: number,
  ): Promise<{ report: PassReport; cause: PassCause }>;
}

async function withLoop(
  opts: {
    config?: (node: SimNode) => Partial<Config>;
    manualTimers?: boolean;
    /** What happens before the loop starts; by default, `checkpointed`. */
    prepare?: (f: DaemonFixture) => Promise<void>;
  },
  fn: (l: Looping) => Promise<void>,
) {
  const feed = new ChangeFanout();
  let timers: ManualTimers | undefined;
  const f = await DaemonFixture.start(
    (node) => ({ pollIntervalMs: HOUR_MS, ...opts.config?.(node) }),
    {},
    {
      changes: feed,
      ...(opts.manualTimers
        ? { timers: (clock: ManualClock) => timers = new ManualTimers((ms) => clock.advance(ms)) }
        : {}),
    },
  );
  const stop = new AbortController();
  let looping: Promise<void> | undefined;
  try {
    await (opts.prepare ?? checkpointed)(f);
    const passes: Looping["passes"] = [];
    f.daemon.onPass((report, cause) => passes.push({ report, cause }));
    const until: Looping["until"] = async (matches, after = 0) => {
      const found = () => passes.slice(after).find((p) => matches(p.report, p.cause));
      for (let i = 0; i < 1_500 && !found(); i++) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const pass = found();
      assert(pass, `no such pass; passes: ${JSON.stringify(passes.map((p) => p.cause))}`);
      return pass;
    };
    looping = f.daemon.loop(stop.signal);
    await fn({ f, feed, timers, passes, until });
  } finally {
    stop.abort();
    await looping;
    await f.close();
  }
}

Deno.test("events: a change on the sources' feed runs a pass; the API server lost, an `apiserver` pass activates without waiting for the poll", async () => {
  await withLoop({}, async ({ f, feed, passes, until }) => {
    const first = await until((_, cause) => cause.trigger === "start");
    assertEquals(first.report.plan.state[APISERVER]?.state, "inactive");
    await f.node.loseControlPlane();
    const seen = passes.length;
    feed.emit("apiserver lost");
    const lost = await until((_, cause) => cause.trigger === "apiserver", seen);
    assertEquals(lost.cause.reasons, ["apiserver lost"]);
    assertEquals(lost.report.plan.starts.length, 3, "every checkpoint activated");
    assertEquals(lost.report.applied.filter((a) => a.op === "start").length, 3);
  });
});

Deno.test("events: a checkpoint's manifest removed from the static-pod dir runs a pass that puts it back", async () => {
  await withLoop({}, async ({ f, feed, passes, until }) => {
    await until((_, cause) => cause.trigger === "start");
    await f.node.loseControlPlane();
    feed.emit("apiserver lost");
    await until((report) => report.plan.starts.length === 3);
    const id = "kube-system/kube-scheduler-q8w2c";
    const file = join(f.config.staticPodDir, f.daemon.agent.manifestFileOf(id)!);
    const seen = passes.length;
    await Deno.remove(file);
    const back = await until(
      (report) => report.applied.some((a) => a.op === "start" && a.id === id),
      seen,
    );
    assertEquals(back.cause.trigger, "files");
    assert(back.cause.reasons.includes(`remove ${file}`), back.cause.reasons.join(", "));
    await Deno.stat(file);
  });
});

Deno.test("events: a file written into the inactive dir runs a pass", async () => {
  await withLoop({}, async ({ f, passes, until }) => {
    await until((_, cause) => cause.trigger === "start");
    const seen = passes.length;
    const stray = join(f.config.inactiveDir, "stray.yaml");
    await Deno.writeTextFile(stray, "kind: Pod\n");
    const pass = await until((_, cause) => cause.reasons.includes(`create ${stray}`), seen);
    assertEquals(pass.cause.trigger, "files");
  });
});

Deno.test("events: the agent's own writes in the watched dirs cost one more pass, never a chain", async () => {
  // The first pass writes the checkpoints while their dirs are watched. The kernel tells a
  // watch's events in order, so once a sentinel file's creation has run a pass, every event of
  // the agent's writes before it has too: a second sentinel then runs exactly one pass of its
  // own if and only if that pass wrote nothing.
  const nothing = async () => {};
  await withLoop({ manualTimers: true, prepare: nothing }, async ({ f, timers, passes, until }) => {
    const sentinelPass = async (name: string) => {
      const path = join(f.config.inactiveDir, name);
      await Deno.writeTextFile(path, "");
      const asked = (p: { cause: PassCause }) => p.cause.reasons.includes(`create ${path}`);
      for (let i = 0; i < 500 && !passes.some(asked); i++) {
        await timers!.advance(MAX_SPACING_MS);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const index = passes.findIndex(asked);
      assert(index >= 0, `no pass for ${name}: ${JSON.stringify(passes.map((p) => p.cause))}`);
      return { index, path };
    };
    const start = await until((_, cause) => cause.trigger === "start");
    assert(start.report.bytesWritten > 0);
    const first = await sentinelPass("sentinel-1");
    assertEquals(passes[first.index].report.bytesWritten, 0);
    const second = await sentinelPass("sentinel-2");
    assertEquals(second.index, first.index + 1, "no pass between the two sentinels");
    assertEquals(passes[second.index].cause.reasons, [`create ${second.path}`]);
    assertEquals(passes[second.index].report.bytesWritten, 0);
  });
});

Deno.test("events: a grace deadline runs the pass that garbage-collects at the deadline, not at the next poll", async () => {
  // Nothing is written in the watched dirs until the deadline, and the test's timers fire only
  // what it lets them.
  await withLoop({ manualTimers: true }, async ({ f, timers, passes, until }) => {
    await until((_, cause) => cause.trigger === "start");
    const id = "kube-system/kube-controller-manager-m4t9z";
    await f.node.deleteParent(id);
    const gone = await f.daemon.runPass();
    const graceEnd = gone.plan.state[id].graceEnd!;
    assertEquals(gone.plan.state[id].state, "inactive-grace");
    assertEquals(
      graceEnd,
      formatInstant(f.clock.now() + millisToDuration(f.config.checkpointGracePeriodMs)),
    );
    assertEquals(timers!.armed, [f.config.checkpointGracePeriodMs, HOUR_MS]);

    const seen = passes.length;
    await timers!.advance(f.config.checkpointGracePeriodMs - 1);
    assertEquals(passes.length, seen, "nothing before the deadline");
    await timers!.advance(1);
    const removed = await until((_, cause) => cause.trigger === "deadline", seen);
    assertEquals(removed.report.startedAt, graceEnd);
    assertEquals(removed.report.plan.removes, [id]);
    assertEquals(removed.cause.reasons, [`grace period of ${id} ends`]);
    assert(!(id in removed.report.plan.state));
  });
});

Deno.test("events: a startTimeout runs the pass that judges the start stalled when it ends", async () => {
  // The kubelet reads etc/kubernetes/manifests and this agent writes next to it, so no copy
  // ever runs. The copies are activated before the loop watches the dirs.
  const activated = async (f: DaemonFixture) => {
    await f.pass();
    await f.node.loseControlPlane();
    assertEquals((await f.pass()).plan.starts.length, 3);
    f.clock.advance(1_000);
  };
  const config = (node: SimNode) => ({
    staticPodDir: join(node.root, "etc/kubernetes/other-manifests"),
  });
  await withLoop(
    { config, manualTimers: true, prepare: activated },
    async ({ f, timers, passes, until }) => {
      const start = await until((_, cause) => cause.trigger === "start");
      assertEquals(start.report.stalledStarts, []);
      const left = f.config.startTimeoutMs - 1_000;
      assertEquals(timers!.armed, [left, HOUR_MS]);

      const seen = passes.length;
      await timers!.advance(left);
      const stalled = await until((_, cause) => cause.trigger === "deadline", seen);
      assertEquals(stalled.report.stalledStarts.length, 3);
      const since = parseInstant(stalled.report.stalledStarts[0].activeSince)!;
      assertEquals(
        stalled.report.startedAt,
        formatInstant(since + millisToDuration(f.config.startTimeoutMs)),
        "judged when the startTimeout ends",
      );
      assertEquals(stalled.cause.reasons.length, 1);
      assert(stalled.cause.reasons[0].startsWith("startTimeout of kube-system/"));
      assertEquals(passes.length, seen + 1, "one pass for the three");
    },
  );
});

Deno.test("events: a pass hung on a peer is not made alive by the events queued behind it", async () => {
  await withLoop(
    { config: () => ({ apiTimeoutMs: HOUR_MS }), manualTimers: true },
    async ({ f, feed, timers, passes, until }) => {
      await until((_, cause) => cause.trigger === "start");
      f.node.apiServer.setFault("hang");
      const asked = f.node.apiServer.requests.length;
      const seen = passes.length;
      const asking = f.daemon.runPass("the test");
      for (let i = 0; i < 1_000 && f.node.apiServer.requests.length === asked; i++) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      assert(f.node.apiServer.requests.length > asked, "the pass asked the API server");
      // Events keep coming while the pass waits past its deadline.
      for (let i = 0; i < 20; i++) {
        feed.emit("pod changed");
        await timers!.advance(passDeadlineMs(f.config) / 10);
      }
      assertEquals(passes.length, seen, "no pass ran beside the hung one");
      assertEquals(f.daemon.loopAlive(), false);

      await f.node.apiServer.stopListening();
      assertEquals((await asking).complete, false);
      // The spacing after a pass that took that long: its cap; but the API server failed, so
      // the outage poll comes first, and the events behind the hung pass go with it.
      await timers!.advance(MAX_SPACING_MS);
      const after = await until((_, cause) => cause.trigger === "change", seen);
      assertEquals(after.cause.reasons, ["pod changed", "poll"]);
      assertEquals(after.cause.triggers, 21, "the events behind it made one pass");
      assert(f.daemon.loopAlive());
    },
  );
});

Deno.test("events: once the loop stops, changes run no pass, and an admin request still does", async () => {
  const feed = new ChangeFanout();
  const f = await DaemonFixture.start({ pollIntervalMs: HOUR_MS }, {}, { changes: feed });
  try {
    const stop = new AbortController();
    const looping = f.daemon.loop(stop.signal);
    const passes: PassCause[] = [];
    f.daemon.onPass((_, cause) => passes.push(cause));
    stop.abort();
    await looping;
    const ran = passes.length;
    feed.emit("pod changed");
    await Deno.writeTextFile(join(f.config.inactiveDir, "stray.yaml"), "kind: Pod\n");
    const report = await f.daemon.runPass("POST /v1/reconcile");
    assertEquals(passes.slice(ran).map((c) => [c.trigger, c.reasons]), [
      ["request", ["POST /v1/reconcile"]],
    ]);
    assert(report.startedAt);
  } finally {
    await f.close();
  }
});

Deno.test("outage polls: while the API server fails and a checkpoint is inactive, a poll every OUTAGE_POLL_MS; a parent stopped then is activated within a few; back to the poll interval once the API server is back or every copy is active", async () => {
  const POLL_MS = 5_000;
  await withLoop(
    { manualTimers: true, config: () => ({ pollIntervalMs: POLL_MS }) },
    async ({ f, feed, timers, passes, until }) => {
      await until((_, cause) => cause.trigger === "start");
      assertEquals(timers!.armed, [POLL_MS]);
      /** Moves the timers on by `ms` and waits for the pass that fires then. */
      const advance = async (ms: number) => {
        const seen = passes.length;
        await timers!.advance(ms);
        return await until(() => true, seen);
      };
      /** Moves the timers on until a pass answers `reason` (merged with others or not). */
      const answered = async (reason: string) => {
        const seen = passes.length;
        const asked = (p: { cause: PassCause }) => p.cause.reasons.includes(reason);
        for (let i = 0; i < 20 && !passes.slice(seen).some(asked); i++) {
          await advance(MIN_SPACING_MS);
        }
        return await until((_, cause) => asked({ cause }), seen);
      };
      /** Whether the next poll is armed `ms` after the last pass (other timers aside). */
      const pollsIn = (ms: number) =>
        timers!.armed.includes(ms) &&
        !timers!.armed.includes(ms === POLL_MS ? OUTAGE_POLL_MS : POLL_MS);
      const ids = Object.keys(passes[0].report.plan.state);
      // Every request fails from now on, also once the server listens again (SimNode.sync).
      f.node.apiServer.setFault("server-error");
      await f.node.apiServer.stopListening();
      feed.emit(API_LOST);
      const lost = await advance(MIN_SPACING_MS);
      assertEquals(lost.cause.trigger, "apiserver");
      assert(lost.report.failures.some((failure) => failure.source === "apiserver"));
      assertEquals(lost.report.plan.starts, []);
      assert(pollsIn(OUTAGE_POLL_MS), `${timers!.armed}`);
      // Every poll after it finds the same answers, and is idle.
      for (let i = 0; i < 5; i++) {
        const poll = await advance(OUTAGE_POLL_MS);
        assertEquals([poll.cause.trigger, poll.report.idle], ["poll", true]);
      }

      // A parent stops: the kubelet stops its pod (the simulated kubelet is told directly, not
      // through the failing API server), and the next poll activates its copy.
      const [id] = ids.filter((id) => id !== APISERVER);
      await f.node.deleteParent(id);
      const activated = await advance(OUTAGE_POLL_MS);
      assertEquals([activated.report.idle, activated.report.plan.starts], [undefined, [id]]);
      const manifest = f.daemon.agent.manifestFileOf(id)!;
      assert(Deno.statSync(join(f.config.staticPodDir, manifest)).isFile);
      // Others are still inactive: the polls stay fast.
      assert(pollsIn(OUTAGE_POLL_MS), `${timers!.armed}`);

      // The API server back: the poll interval again.
      f.node.apiServer.setFault("none");
      await f.node.sync();
      feed.emit(API_BACK);
      const back = await answered(API_BACK);
      assertEquals(back.report.failures, []);
      assert(pollsIn(POLL_MS), `${timers!.armed}`);

      // Lost with every parent stopped: every copy is activated, and the polls are not fast.
      await f.node.loseControlPlane();
      feed.emit(API_LOST);
      const all = await answered(API_LOST);
      assert(all.report.failures.some((failure) => failure.source === "apiserver"));
      assert(
        Object.values(all.report.plan.state).every((entry) => entry.state.startsWith("active")),
        JSON.stringify(all.report.plan.state),
      );
      assert(pollsIn(POLL_MS), `${timers!.armed}`);
    },
  );
});
