/** Judging parents crash-looping on an unproven spec (docs/design.md#crash-loops). */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import type { Pod } from "../../lib/core/pod.ts";
import { NANOS_PER_SECOND } from "../../lib/core/time.ts";
import { CrashLoops } from "../../lib/pass/crash_loops.ts";
import type { RunningPod } from "../../lib/sources/cri.ts";

const ID = "kube-system/kube-apiserver-r0002";
const S = NANOS_PER_SECOND;
const T0 = 1_800_000_000n * S;

function parent(ready = false, uid = "uid-new"): Pod {
  const [namespace, name] = ID.split("/");
  return {
    metadata: { namespace, name, uid },
    status: { conditions: [{ type: "Ready", status: ready ? "True" : "False" }] },
  };
}

function runs(restarts: number, uid = "uid-new"): RunningPod {
  const [namespace, name] = ID.split("/");
  return { namespace, name, uid, sandboxIds: ["s"], restarts };
}

/** One pass `seconds` after T0; the checkpoint keeps version 3 while a candidate waits. */
function judge(
  loops: CrashLoops,
  seconds: number,
  pod: Pod,
  running: RunningPod[] | undefined,
  unproven = true,
) {
  return loops.judge({
    now: T0 + BigInt(seconds) * S,
    crashLoopAfterMs: 30_000,
    parents: [pod],
    running,
    keptWhileUnproven: (id) => id === ID && unproven ? 3 : undefined,
  });
}

Deno.test("restarts rising, never Ready, for crashLoopAfter: crash-looping, with the version kept", () => {
  const loops = new CrashLoops();
  assertEquals(judge(loops, 0, parent(), [runs(1)]), {});
  // Long enough, but no restart since it was first seen: not yet.
  assertEquals(judge(loops, 31, parent(), [runs(1)]), {});
  assertEquals(judge(loops, 35, parent(), [runs(2)]), { [ID]: 3 });
  // Judged, it stays so between restarts, and while its copy holds its ports.
  assertEquals(judge(loops, 40, parent(), [runs(2)]), { [ID]: 3 });
  // The runtime did not answer this pass: nothing judged anew, the judgment kept.
  assertEquals(judge(loops, 45, parent(), undefined), {});
  assertEquals(judge(loops, 50, parent(), [runs(2)]), { [ID]: 3 });
  // Not in the runtime's list at all this pass: the planner sees it not running anyway.
  assertEquals(judge(loops, 55, parent(), []), {});
  assertEquals(judge(loops, 60, parent(), [runs(3)]), { [ID]: 3 });
  // Ready: proven, and forgotten.
  assertEquals(judge(loops, 65, parent(true), [runs(3)]), {});
  assertEquals(judge(loops, 70, parent(), [runs(4)]), {});
});

Deno.test("a proven spec, restarts before crashLoopAfter, or another pod: never crash-looping", () => {
  const proven = new CrashLoops();
  assertEquals(judge(proven, 0, parent(), [runs(1)], false), {});
  assertEquals(judge(proven, 60, parent(), [runs(5)], false), {});
  const quick = new CrashLoops();
  assertEquals(judge(quick, 0, parent(), [runs(0)]), {});
  assertEquals(judge(quick, 20, parent(), [runs(3)]), {});
  // A new pod of the same name (another uid) is judged afresh.
  const loops = new CrashLoops();
  judge(loops, 0, parent(), [runs(1)]);
  assertEquals(judge(loops, 40, parent(), [runs(2)]), { [ID]: 3 });
  assertEquals(judge(loops, 45, parent(false, "uid-next"), [runs(4, "uid-next")]), {});
});

Deno.test("judged before a restart: judged again at once, until Ready", () => {
  const loops = new CrashLoops();
  const judgedBefore = new Map([[ID, 3]]);
  const pass = (seconds: number, pod: Pod, restarts: number) =>
    loops.judge({
      now: T0 + BigInt(seconds) * S,
      crashLoopAfterMs: 30_000,
      parents: [pod],
      running: [runs(restarts)],
      // This process has not watched the candidate yet: the kept version comes from disk.
      keptWhileUnproven: () => undefined,
      judgedBefore,
    });
  assertEquals(pass(0, parent(), 4), { [ID]: 3 });
  assertEquals(pass(5, parent(), 4), { [ID]: 3 });
  assertEquals(pass(10, parent(true), 5), {});
});
