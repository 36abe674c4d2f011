/** Judging parents crash-looping on an unproven spec (docs/design.md#crash-loops). */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { NANOS_PER_SECOND } from "../../lib/core/time.ts";
import { type CrashLoopPod, CrashLoops } from "../../lib/pass/crash_loops.ts";

const ID = "kube-system/kube-apiserver-r0002";
const S = NANOS_PER_SECOND;
const T0 = 1_800_000_000n * S;

/** The runtime's pod of ID, not Ready unless said, no container running unless said. */
function pod(restarts: number, more: Partial<CrashLoopPod> = {}): CrashLoopPod {
  return { id: ID, uid: "uid-new", restarts, containerRunning: false, ready: false, ...more };
}

/** One pass `seconds` after T0; the checkpoint keeps version 3 while a candidate waits. */
function judge(
  loops: CrashLoops,
  seconds: number,
  pods: CrashLoopPod[] | undefined,
  more: { unproven?: boolean; judgedBefore?: Map<string, number> } = {},
) {
  return loops.judge({
    now: T0 + BigInt(seconds) * S,
    crashLoopAfterMs: 30_000,
    pods,
    keptWhileUnproven: (id) => id === ID && (more.unproven ?? true) ? 3 : undefined,
    ...(more.judgedBefore ? { judgedBefore: more.judgedBefore } : {}),
  });
}

Deno.test("restarts rising, never Ready, for crashLoopAfter: crash-looping, with the version kept", () => {
  const loops = new CrashLoops();
  assertEquals(judge(loops, 0, [pod(1)]), {});
  // Long enough, but no restart since it was first seen: not yet.
  assertEquals(judge(loops, 31, [pod(1)]), {});
  // A restart, but a container runs at this moment: perhaps up at last; not yet.
  assertEquals(judge(loops, 33, [pod(2, { containerRunning: true })]), {});
  assertEquals(judge(loops, 35, [pod(2)]), { [ID]: 3 });
  // Judged, it stays so between restarts, running a moment or not.
  assertEquals(judge(loops, 40, [pod(3, { containerRunning: true })]), { [ID]: 3 });
  // The runtime did not answer this pass: nothing judged anew, the judgment kept.
  assertEquals(judge(loops, 45, undefined), {});
  assertEquals(judge(loops, 50, [pod(3)]), { [ID]: 3 });
  // Not in the runtime's list this pass: the planner sees it not running anyway.
  assertEquals(judge(loops, 55, []), {});
  assertEquals(judge(loops, 60, [pod(4)]), { [ID]: 3 });
  // Ready: proven, and forgotten.
  assertEquals(judge(loops, 65, [pod(4, { ready: true, containerRunning: true })]), {});
  assertEquals(judge(loops, 70, [pod(5)]), {});
});

Deno.test("a proven spec, restarts before crashLoopAfter, or another pod: never crash-looping", () => {
  const proven = new CrashLoops();
  assertEquals(judge(proven, 0, [pod(1)], { unproven: false }), {});
  assertEquals(judge(proven, 60, [pod(5)], { unproven: false }), {});
  const quick = new CrashLoops();
  assertEquals(judge(quick, 0, [pod(0)]), {});
  assertEquals(judge(quick, 20, [pod(3)]), {});
  // A new pod of the same name (another uid) is judged afresh.
  const loops = new CrashLoops();
  judge(loops, 0, [pod(1)]);
  assertEquals(judge(loops, 40, [pod(2)]), { [ID]: 3 });
  assertEquals(judge(loops, 45, [pod(4, { uid: "uid-next" })]), {});
});

Deno.test("judged before a restart: judged again at once, until Ready", () => {
  const loops = new CrashLoops();
  const judgedBefore = new Map([[ID, 3]]);
  // This process has not watched the candidate yet: the kept version comes from disk.
  const pass = (seconds: number, p: CrashLoopPod) =>
    judge(loops, seconds, [p], { unproven: false, judgedBefore });
  assertEquals(pass(0, pod(4)), { [ID]: 3 });
  assertEquals(pass(5, pod(4, { containerRunning: true })), { [ID]: 3 });
  assertEquals(pass(10, pod(5, { ready: true, containerRunning: true })), {});
});
