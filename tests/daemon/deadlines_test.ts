/**
 * The next deadline a pass leaves (lib/daemon/deadlines.ts), by table: the earliest grace end or
 * startTimeout end after the pass started, none for what the pass already had to decide.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { type DeadlineInput, nextDeadline } from "../../lib/daemon/deadlines.ts";
import { formatInstant, parseInstant, secondsToDuration } from "../../lib/core/time.ts";
import type { StatusRecord } from "../../lib/store/status_record.ts";

const T0 = "2026-03-01T10:00:00Z";
const at = (seconds: number) => formatInstant(parseInstant(T0)! + secondsToDuration(seconds));
const MINUTE_MS = 60_000;

function record(id: string, state: StatusRecord["state"], extra: Partial<StatusRecord> = {}) {
  return { id, state, createdAt: at(-3600), reason: "r", message: "m", ...extra };
}

function input(opts: {
  state?: DeadlineInput["report"]["plan"]["state"];
  records?: StatusRecord[];
  stalled?: string[];
}): DeadlineInput {
  return {
    report: {
      startedAt: T0,
      plan: { starts: [], stops: [], removes: [], state: opts.state ?? {} },
      stalledStarts: (opts.stalled ?? []).map((id) => ({ id, activeSince: at(-600), copy: "" })),
    },
    records: opts.records ?? [],
    startTimeoutMs: 2 * MINUTE_MS,
  };
}

const cases: [string, DeadlineInput, { at: string; reason: string } | undefined][] = [
  ["nothing tracked", input({}), undefined],
  [
    "no state with a deadline",
    input({
      state: { "kube-system/a": { state: "inactive" }, "kube-system/b": { state: "active" } },
    }),
    undefined,
  ],
  [
    "the earliest grace end",
    input({
      state: {
        "kube-system/a": { state: "inactive-grace", graceEnd: at(60) },
        "kube-system/b": { state: "active-grace", graceEnd: at(30.5) },
      },
    }),
    { at: at(30.5), reason: "grace period of kube-system/b ends" },
  ],
  [
    "a grace end the pass started after: held (the runtime did not answer), left to the poll",
    input({ state: { "kube-system/a": { state: "inactive-grace", graceEnd: at(-1) } } }),
    undefined,
  ],
  [
    "a grace end at the instant the pass started was its to decide",
    input({ state: { "kube-system/a": { state: "inactive-grace", graceEnd: at(0) } } }),
    undefined,
  ],
  [
    "a started checkpoint's startTimeout end, before a later grace end",
    input({
      state: { "kube-system/a": { state: "inactive-grace", graceEnd: at(300) } },
      records: [record("kube-system/b", "active", { lastActivatedAt: at(-30) })],
    }),
    { at: at(90), reason: "startTimeout of kube-system/b ends" },
  ],
  [
    "no startTimeout for one already stalled, one stopped, or one never activated",
    input({
      records: [
        record("kube-system/a", "active", { lastActivatedAt: at(-30) }),
        record("kube-system/b", "inactive", {
          lastActivatedAt: at(-30),
          lastDeactivatedAt: at(-10),
        }),
        record("kube-system/c", "self-checkpoint"),
      ],
      stalled: ["kube-system/a"],
    }),
    undefined,
  ],
  [
    "active-grace and self-checkpoint are started",
    input({
      records: [
        record("kube-system/a", "active-grace", {
          graceEnd: at(600),
          lastActivatedAt: at(-100),
        }),
        record("kube-system/b", "self-checkpoint", { lastActivatedAt: at(-110) }),
      ],
    }),
    { at: at(10), reason: "startTimeout of kube-system/b ends" },
  ],
];

for (const [name, given, expected] of cases) {
  Deno.test(`next deadline: ${name}`, () => {
    const next = nextDeadline(given);
    assertEquals(next && { at: formatInstant(next.at), reason: next.reason }, expected);
  });
}
