/**
 * Promotion's pure parts: what a parent's checkpoint holds after a pass (decidePromotion), and
 * when a pod proves its spec (parentReadiness). Every row names the facts and the decision.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import {
  type Candidate,
  decidePromotion,
  parentReadiness,
  type PromotionFacts,
} from "../../lib/core/promotion.ts";
import type { Pod } from "../../lib/core/pod.ts";

const S = 1_000_000_000n;
const T0 = 1_000n * S;

function facts(f: Partial<PromotionFacts>): PromotionFacts {
  return {
    now: T0,
    promoteAfterMs: 60_000,
    maxGapMs: 15_000,
    first: false,
    runsKept: false,
    manifest: "spec B",
    version: 2,
    ready: false,
    pinned: false,
    ...f,
  };
}

/** A candidate seen Ready since `readySince`, last by the pass `lastReadyAgo` seconds ago. */
function watched(readySince?: bigint, manifest = "spec B", lastReadyAgo = 5n): Candidate {
  return {
    manifest,
    version: 2,
    seenAt: T0 - 100n * S,
    ...(readySince !== undefined ? { readySince, lastReadyAt: T0 - lastReadyAgo * S } : {}),
  };
}

Deno.test("decidePromotion: every case", () => {
  const rows: [string, Partial<PromotionFacts>, string, bigint | undefined][] = [
    ["no checkpoint yet: the first is taken", { first: true }, "first", undefined],
    ["first even when pinned and not Ready", { first: true, pinned: true }, "first", undefined],
    ["the parent runs the kept spec", { runsKept: true, candidate: watched() }, "kept", undefined],
    ["a new spec, not Ready: waits", {}, "wait:not Ready", undefined],
    ["a new spec, Ready now: waits from now", { ready: true }, "wait:Ready for less than 60 s", T0],
    [
      "Ready 59 s: waits",
      { ready: true, candidate: watched(T0 - 59n * S) },
      "wait:Ready for less than 60 s",
      T0 - 59n * S,
    ],
    [
      "Ready 60 s: promoted",
      { ready: true, candidate: watched(T0 - 60n * S) },
      "promote",
      T0 - 60n * S,
    ],
    [
      "Ready 60 s, then not Ready: the wait starts over",
      { ready: false, candidate: watched(T0 - 60n * S) },
      "wait:not Ready",
      undefined,
    ],
    [
      "another spec than the candidate's: a new candidate, its wait from now",
      { ready: true, candidate: watched(T0 - 90n * S, "spec C") },
      "wait:Ready for less than 60 s",
      T0,
    ],
    [
      "the same spec as another version number: a new candidate",
      { ready: true, version: 3, candidate: watched(T0 - 90n * S) },
      "wait:Ready for less than 60 s",
      T0,
    ],
    [
      "Ready 60 s, but no pass for 16 s (an agent stopped): the wait starts over",
      { ready: true, candidate: watched(T0 - 60n * S, "spec B", 16n) },
      "wait:Ready for less than 60 s",
      T0,
    ],
    [
      "Ready 60 s, the last pass 15 s ago (an agent restarted at once): promoted",
      { ready: true, candidate: watched(T0 - 60n * S, "spec B", 15n) },
      "promote",
      T0 - 60n * S,
    ],
    [
      "pinned: waits however long Ready",
      { ready: true, pinned: true, candidate: watched(T0 - 900n * S) },
      "wait:pinned",
      T0 - 900n * S,
    ],
    ["promoteAfter 0: promoted at once, Ready or not", { promoteAfterMs: 0 }, "promote", undefined],
    [
      "promoteAfter 0 and pinned: waits",
      { promoteAfterMs: 0, pinned: true },
      "wait:pinned",
      undefined,
    ],
  ];
  for (const [label, f, want, readySince] of rows) {
    const d = decidePromotion(facts(f));
    const got = d.kind === "wait" ? `wait:${d.why}` : d.kind;
    assertEquals(got, want, label);
    if (d.kind === "wait" || d.kind === "promote") {
      assertEquals(d.candidate.readySince, readySince, label);
      assertEquals(d.candidate.lastReadyAt, readySince === undefined ? undefined : T0, label);
      assertEquals(d.candidate.manifest, facts(f).manifest, label);
      const same = f.candidate?.manifest === facts(f).manifest &&
        f.candidate.version === facts(f).version;
      assertEquals(d.candidate.seenAt, same ? f.candidate!.seenAt : T0, label);
    }
  }
});

function pod(status: Record<string, unknown>, generation?: number): Pod {
  return {
    metadata: {
      namespace: "kube-system",
      name: "p",
      uid: "u1",
      ...(generation !== undefined ? { generation } : {}),
    },
    spec: { containers: [{ name: "c", image: "i" }] },
    status,
  };
}

const READY = { conditions: [{ type: "Ready", status: "True" }] };

Deno.test("parentReadiness: the Ready condition of the very pod, run by the runtime, not active", () => {
  const running = { running: true, active: false };
  const rows: [string, Pod, { running: boolean; active: boolean }, boolean, string][] = [
    ["Ready and running", pod(READY), running, true, "Ready"],
    [
      "Ready False",
      pod({ conditions: [{ type: "Ready", status: "False" }] }),
      running,
      false,
      "not Ready",
    ],
    ["no conditions (a kubelet that has not reported)", pod({}), running, false, "not Ready"],
    [
      "only other conditions",
      pod({ conditions: [{ type: "PodScheduled", status: "True" }] }),
      running,
      false,
      "not Ready",
    ],
    [
      "a stale Ready the runtime does not back",
      pod(READY),
      { running: false, active: false },
      false,
      "the runtime does not run it",
    ],
    [
      "its checkpoint is active",
      pod(READY),
      { running: true, active: true },
      false,
      "its checkpoint is active",
    ],
    [
      "status of an older generation",
      pod({ ...READY, observedGeneration: 1 }, 2),
      running,
      false,
      "its status is of an older spec",
    ],
    [
      "status of this generation",
      pod({ ...READY, observedGeneration: 2 }, 2),
      running,
      true,
      "Ready",
    ],
    ["a server that sets no observedGeneration", pod(READY, 2), running, true, "Ready"],
  ];
  for (const [label, p, ctx, ready, why] of rows) {
    assertEquals(parentReadiness(p, ctx), { ready, why }, label);
  }
});
