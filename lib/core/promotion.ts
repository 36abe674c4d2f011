/**
 * Promotion by readiness (docs/design.md#versions), as pure functions: whether the pod a pass
 * sees is Ready as a candidate's proof, and what a parent's checkpoint holds after this pass:
 * the first version, the kept version, or a candidate that waits or is promoted. The planner's
 * states are not touched: promotion decides what a checkpoint contains, never its state.
 */
import { asArray, isObject } from "./json.ts";
import type { Pod } from "./pod.ts";
import { type Instant, millisToDuration } from "./time.ts";

/** A spec that differs from the kept version's, watched until it has proved itself. */
export interface Candidate {
  /** Its sanitized manifest, as the version it would become renders it. */
  manifest: string;
  /** The version it would become. */
  version: number;
  /** When a pass first saw it. */
  seenAt: Instant;
  /** Since when every pass has seen its parent Ready; unset while it is not. */
  readySince?: Instant;
  /** The last pass that saw its parent Ready. */
  lastReadyAt?: Instant;
}

/** What one pass sees of a parent, for its checkpoint. */
export interface PromotionFacts {
  now: Instant;
  /** `promoteAfter`: 0 promotes a new spec at once, as before versions existed. */
  promoteAfterMs: number;
  /**
   * The longest time between two passes that saw the parent Ready for its readiness to count
   * as continuous (readinessGapMs): longer, and nobody looked in between.
   */
  maxGapMs: number;
  /** The parent has no checkpoint yet: its first is taken as it is. */
  first: boolean;
  /** The parent, sanitized for the kept version's files, renders as the kept manifest. */
  runsKept: boolean;
  /** The parent, sanitized as the next version: what a candidate of this pass would be. */
  manifest: string;
  version: number;
  /** The candidate of an earlier pass, if any. */
  candidate?: Candidate;
  /** Whether the pod this pass sanitized is Ready (parentReadiness). */
  ready: boolean;
  pinned: boolean;
}

export type PromotionDecision =
  /** No checkpoint yet: take this spec as the first version. */
  | { kind: "first" }
  /** The parent runs the kept version: keep it (and its files fresh); no candidate. */
  | { kind: "kept" }
  /** The new spec is watched; the kept version stays in place. */
  | { kind: "wait"; candidate: Candidate; why: string }
  /** The candidate becomes the kept version. */
  | { kind: "promote"; candidate: Candidate };

function seconds(ms: number): string {
  return `${ms / 1000} s`;
}

export function decidePromotion(f: PromotionFacts): PromotionDecision {
  if (f.first) return { kind: "first" };
  if (f.runsKept) return { kind: "kept" };
  const same = f.candidate?.manifest === f.manifest && f.candidate.version === f.version;
  const earlier = same ? f.candidate : undefined;
  const streak = earlier?.readySince !== undefined && earlier.lastReadyAt !== undefined &&
    f.now - earlier.lastReadyAt <= millisToDuration(f.maxGapMs);
  const readySince = f.ready ? (streak ? earlier!.readySince : f.now) : undefined;
  const candidate: Candidate = {
    manifest: f.manifest,
    version: f.version,
    seenAt: earlier?.seenAt ?? f.now,
    ...(readySince !== undefined ? { readySince, lastReadyAt: f.now } : {}),
  };
  if (f.pinned) return { kind: "wait", candidate, why: "pinned" };
  if (f.promoteAfterMs === 0) return { kind: "promote", candidate };
  if (readySince === undefined) return { kind: "wait", candidate, why: "not Ready" };
  const needed = millisToDuration(f.promoteAfterMs);
  if (f.now - readySince >= needed) return { kind: "promote", candidate };
  return {
    kind: "wait",
    candidate,
    why: `Ready for less than ${seconds(f.promoteAfterMs)}`,
  };
}

/**
 * How far apart two passes that saw a parent Ready may be for its readiness to count as
 * continuous: three poll intervals, as liveness allows the loop (lib/daemon/probes.ts). A pass
 * that outran that, an agent stopped for longer, and readiness starts over; an agent restarted
 * at once, or `--once` run every poll interval, keeps it.
 */
export function readinessGapMs(pollIntervalMs: number): number {
  return 3 * pollIntervalMs;
}

/** What the pass knows about the pod besides the pod itself. */
export interface ReadinessContext {
  /** The runtime runs a pod with this uid (lib/sources/cri.ts#runningPods). */
  running: boolean;
  /** The checkpoint is active: its copy, not the parent, is what runs. */
  active: boolean;
}

/**
 * Whether `pod` proves its own spec: its `Ready` condition is True in the very object whose
 * spec was sanitized, the status is of that spec (`status.observedGeneration`, where the server
 * sets it, has caught up with `metadata.generation`), the runtime runs that pod (by uid), and
 * the checkpoint is not active. A stale status, kept by an API server that came back before
 * the kubelet reported again, is never taken for readiness: the runtime must agree.
 */
export function parentReadiness(pod: Pod, ctx: ReadinessContext): { ready: boolean; why: string } {
  if (ctx.active) return { ready: false, why: "its checkpoint is active" };
  if (!ctx.running) return { ready: false, why: "the runtime does not run it" };
  const status = isObject(pod.status) ? pod.status : {};
  const generation = (pod.metadata as { generation?: unknown }).generation;
  const observed = status.observedGeneration;
  if (typeof generation === "number" && typeof observed === "number" && observed < generation) {
    return { ready: false, why: "its status is of an older spec" };
  }
  const condition = asArray(status.conditions).find((c) => c.type === "Ready");
  if (condition?.status !== "True") return { ready: false, why: "not Ready" };
  return { ready: true, why: "Ready" };
}
