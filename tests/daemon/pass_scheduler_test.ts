/**
 * When the daemon runs passes (lib/daemon/pass_scheduler.ts), on timers the test drives: the
 * first at once, then on triggers, coalesced and spaced, at deadlines, on requests and every poll
 * interval; one at a time; nothing left armed once stopped. Passes take time only when the test
 * says so, on the same timers.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import {
  COALESCE_MS,
  MAX_SPACING_MS,
  MIN_SPACING_MS,
  type PassCause,
  PassScheduler,
  spacingMs,
} from "../../lib/daemon/pass_scheduler.ts";
import { MAX_TIMER_MS } from "../../lib/util/timers.ts";
import { createLogger } from "../../lib/util/log.ts";
import { ManualTimers, settle } from "../helpers/manual_timers.ts";

const POLL_MS = 5_000;

interface Pass {
  cause: PassCause;
  startedAt: number;
  endedAt?: number;
}

/** A scheduler whose passes last `passMs` on the test's timers (0: they end at once). */
function scheduler(opts: { passMs?: number; fail?: boolean } = {}) {
  const timers = new ManualTimers();
  const passes: Pass[] = [];
  const logged: string[] = [];
  const log = createLogger({ minLevel: "debug", write: (line) => logged.push(line) });
  const s = new PassScheduler<number>({
    pollIntervalMs: POLL_MS,
    timers,
    log,
    run: async (cause) => {
      const pass: Pass = { cause, startedAt: timers.now() };
      passes.push(pass);
      const ms = opts.passMs ?? 0;
      if (ms > 0) await new Promise<void>((resolve) => timers.after(ms, resolve));
      pass.endedAt = timers.now();
      if (opts.fail) throw new Error("pass broke");
      return passes.length;
    },
  });
  return { s, timers, passes, logged };
}

const triggers = (passes: Pass[]) => passes.map((p) => [p.startedAt, p.cause.trigger]);

Deno.test("scheduler: the first pass at once, then one every poll interval after the last ended", async () => {
  const { s, timers, passes } = scheduler({ passMs: 20 });
  s.start();
  await timers.advance(3 * (20 + POLL_MS));
  assertEquals(triggers(passes), [
    [0, "start"],
    [20 + POLL_MS, "poll"],
    [2 * (20 + POLL_MS), "poll"],
    [3 * (20 + POLL_MS), "poll"],
  ]);
  const stopped = s.stop();
  await timers.advance(20);
  await stopped;
  assertEquals(timers.armed, []);
});

Deno.test("scheduler: changes within the coalescing window make one pass after it, with every reason", async () => {
  const { s, timers, passes } = scheduler();
  s.start();
  await timers.advance(1_000);
  s.trigger("change", "pod changed");
  await timers.advance(10);
  s.trigger("files", "create /m/a.yaml");
  s.trigger("change", "pod changed");
  s.trigger("change", "apiserver lost");
  await timers.advance(COALESCE_MS - 11);
  assertEquals(passes.length, 1, "not before the window has passed");
  await timers.advance(1);
  assertEquals(passes.length, 2);
  assertEquals(passes[1].startedAt, 1_000 + COALESCE_MS);
  assertEquals(passes[1].cause, {
    trigger: "change",
    reasons: ["pod changed", "create /m/a.yaml", "apiserver lost"],
    triggers: 4,
  });
  // The poll counts from the end of the event's pass.
  await timers.advance(POLL_MS);
  assertEquals(triggers(passes).slice(2), [[1_000 + COALESCE_MS + POLL_MS, "poll"]]);
  await s.stop();
});

Deno.test("scheduler: triggers during a pass make one pass after it, the spacing after its end", async () => {
  const { s, timers, passes } = scheduler({ passMs: 30 });
  s.start();
  for (let i = 0; i < 25; i++) {
    s.trigger(i % 2 ? "files" : "change", `event ${i}`);
    await timers.advance(1);
  }
  await timers.advance(1_000);
  assertEquals(triggers(passes), [[0, "start"], [30 + MIN_SPACING_MS, "change"]]);
  assertEquals(passes[1].cause.triggers, 25);
  assertEquals(passes[1].cause.reasons.length, 8, "the log keeps a few reasons, not all");
  await s.stop();
});

Deno.test("scheduler: a storm of events runs passes at most one per spacing, and stops with it", async () => {
  const { s, timers, passes } = scheduler({ passMs: 10 });
  s.start();
  await timers.advance(100);
  const stormMs = 1_000;
  for (let t = 0; t < stormMs; t++) {
    s.trigger("files", `modify /m/${t % 7}.yaml`);
    await timers.advance(1);
  }
  const during = passes.length - 1;
  await timers.advance(POLL_MS - 1);
  const after = passes.slice(during + 1);
  // One pass per spacing plus its own duration: a storm cannot run them back to back.
  for (let i = 2; i < passes.length; i++) {
    assert(passes[i].startedAt - passes[i - 1].endedAt! >= MIN_SPACING_MS, `pass ${i}`);
  }
  assert(during <= Math.ceil(stormMs / (MIN_SPACING_MS + 10)) + 1, `${during} passes`);
  assertEquals(after.map((p) => p.cause.trigger), ["files"], "one pass for the storm's tail");
  await s.stop();
});

Deno.test("scheduler: a request runs at once when idle, answering the triggers waiting", async () => {
  const { s, timers, passes } = scheduler();
  s.start();
  await timers.advance(1_000);
  s.trigger("change", "pod changed");
  const answered = s.request("POST /v1/reconcile");
  await settle();
  assertEquals(await answered, 2);
  assertEquals(passes[1].startedAt, 1_000);
  assertEquals(passes[1].cause.trigger, "change");
  assertEquals(passes[1].cause.reasons, ["pod changed", "POST /v1/reconcile"]);
  await timers.advance(COALESCE_MS + MIN_SPACING_MS);
  assertEquals(passes.length, 2, "the change had its pass");
  await s.stop();
});

Deno.test("scheduler: requests during a pass share one pass after it, which does not wait for the spacing", async () => {
  const { s, timers, passes } = scheduler({ passMs: 40 });
  s.start();
  await timers.advance(10);
  const first = s.request("one");
  const second = s.request("two");
  await timers.advance(30 + 40);
  assertEquals([await first, await second], [2, 2]);
  assertEquals(triggers(passes), [[0, "start"], [40, "request"]]);
  await s.stop();
});

Deno.test("scheduler: without start, requests still run one at a time and nothing else is armed", async () => {
  const { s, timers, passes } = scheduler({ passMs: 5 });
  s.trigger("change", "ignored: not started");
  s.setDeadline(1_000, "ignored: not started");
  const a = s.request("a");
  const b = s.request("b");
  await timers.advance(5);
  assertEquals(await a, 1);
  await timers.advance(5);
  assertEquals(await b, 2);
  assertEquals(triggers(passes), [[0, "request"], [5, "request"]]);
  assertEquals(timers.armed, []);
});

Deno.test("scheduler: a deadline runs a pass when it falls; a new one replaces it; none disarms it", async () => {
  const { s, timers, passes } = scheduler();
  s.start();
  await timers.advance(10);
  s.setDeadline(2_000, "first");
  s.setDeadline(1_500, "grace period of kube-system/a ends");
  await timers.advance(1_500);
  assertEquals(triggers(passes), [[0, "start"], [1_510, "deadline"]]);
  assertEquals(passes[1].cause.reasons, ["grace period of kube-system/a ends"]);
  s.setDeadline(700, "later");
  s.setDeadline(undefined, "");
  await timers.advance(1_000);
  assertEquals(passes.length, 2);
  // A deadline right after a pass keeps the spacing.
  s.setDeadline(0, "due now");
  await timers.advance(MIN_SPACING_MS);
  assertEquals(triggers(passes).slice(2), [[2_510, "deadline"]]);
  // A deadline months away waits as long as a timer can, not at all.
  s.setDeadline(200 * 24 * 3600 * 1000, "a long grace period ends");
  assertEquals(timers.armed, [POLL_MS - MIN_SPACING_MS, MAX_TIMER_MS]);
  await s.stop();
});

Deno.test("scheduler: stopped, no timer is left, triggers are ignored, and the pass under way ends first", async () => {
  const { s, timers, passes } = scheduler({ passMs: 50 });
  s.start();
  s.trigger("change", "during the first pass");
  s.setDeadline(10_000, "later");
  await timers.advance(20);
  let stopped = false;
  const stopping = s.stop().then(() => stopped = true);
  await settle();
  assert(!stopped, "the pass under way has not ended");
  assert(s.running);
  await timers.advance(30);
  await stopping;
  s.trigger("files", "after the stop");
  await timers.advance(POLL_MS * 2);
  assertEquals(triggers(passes), [[0, "start"]]);
  assertEquals(timers.armed, []);
});

Deno.test("scheduler: a pass that throws is logged, and passes go on", async () => {
  const { s, timers, passes, logged } = scheduler({ fail: true });
  s.start();
  await timers.advance(POLL_MS);
  assertEquals(passes.length, 2);
  assertEquals(logged.filter((l) => l.includes('"pass failed"')).length, 2);
  await assertRejects(s.request("asked"), "pass broke");
  assertEquals(logged.filter((l) => l.includes('"pass failed"')).length, 2, "the asker is told");
  await s.stop();
});

Deno.test("scheduler: work between passes waits for the pass under way and holds the ones asked meanwhile", async () => {
  const { s, timers, passes } = scheduler({ passMs: 20 });
  s.start();
  const log: string[] = [];
  const work = (name: string, ms: number, fail = false) =>
    s.between(async () => {
      log.push(`${name} from ${timers.now()} (passes: ${passes.length})`);
      await new Promise<void>((resolve) => timers.after(ms, resolve));
      if (fail) throw new Error(`${name} broke`);
      return name;
    });
  const first = work("verb", 30);
  await timers.advance(10);
  assertEquals(log, [], "not in the middle of a pass");
  const asked = s.request("POST /v1/reconcile");
  await timers.advance(10);
  assertEquals(log, ["verb from 20 (passes: 1)"]);
  const second = work("rollback", 5, true);
  await timers.advance(35);
  assertEquals(await first, "verb");
  await assertRejects(second, "rollback broke");
  assertEquals(log.at(-1), "rollback from 50 (passes: 1)", "work before the passes it holds");
  await timers.advance(20);
  assertEquals(await asked, 2);
  assertEquals(triggers(passes), [[0, "start"], [55, "request"]]);
  await s.stop();
});

Deno.test("scheduler: the spacing is the last pass's duration, between its floor and its cap", () => {
  assertEquals(
    [0, 20, MIN_SPACING_MS, 400, MAX_SPACING_MS, 420_000].map(spacingMs),
    [MIN_SPACING_MS, MIN_SPACING_MS, MIN_SPACING_MS, 400, MAX_SPACING_MS, MAX_SPACING_MS],
  );
});

Deno.test("scheduler: the API server lost after a slow pass: a pass after the coalescing and the spacing's floor only", async () => {
  const slowMs = 2 * MAX_SPACING_MS;
  const { s, timers, passes } = scheduler({ passMs: slowMs });
  s.start();
  await timers.advance(slowMs);
  s.trigger("change", "pod changed");
  s.trigger("apiserver", "apiserver lost");
  await timers.advance(MAX_SPACING_MS);
  // Not the spacing the slow pass set: the change merged into the loss's pass goes with it.
  assertEquals(passes.map((p) => p.startedAt), [0, slowMs + MIN_SPACING_MS]);
  assertEquals(passes[1].cause.reasons, ["pod changed", "apiserver lost"]);
  const stopped = s.stop();
  await timers.advance(slowMs);
  await stopped;
});

Deno.test("scheduler: the API server lost during a slow pass: a pass the floor of spacing after its end; a change waits for the full spacing", async () => {
  const slowMs = 2 * MAX_SPACING_MS;
  const { s, timers, passes } = scheduler({ passMs: slowMs });
  s.start();
  await timers.advance(10);
  s.trigger("apiserver", "apiserver lost");
  await timers.advance(slowMs - 10 + MIN_SPACING_MS);
  assertEquals(triggers(passes), [[0, "start"], [slowMs + MIN_SPACING_MS, "apiserver"]]);
  s.trigger("change", "pod changed");
  await timers.advance(slowMs + MAX_SPACING_MS);
  assertEquals(triggers(passes).slice(2), [[
    2 * slowMs + MIN_SPACING_MS + MAX_SPACING_MS,
    "change",
  ]]);
  const stopped = s.stop();
  await timers.advance(slowMs);
  await stopped;
});

async function assertRejects(promise: Promise<unknown>, message: string) {
  try {
    await promise;
  } catch (e) {
    assertEquals((e as Error).message, message);
    return;
  }
  throw new Error("did not reject");
}
