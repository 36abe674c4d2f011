/**
 * Which parents crash-loop on an unproven spec (docs/design.md#crash-loops): judged from what the
 * node shows, never from the API server, which a bad rollout of the API server takes away.
 *
 * A parent counts as running as soon as its container exists in a ready sandbox, exited or not
 * (lib/sources/cri.ts, runningPods): that is what lets a copy hand back without a hole. But a
 * parent whose new spec cannot start (a bad flag, a broken image) also has exited containers in
 * a ready sandbox, restarted again and again, and would hold back the very copy that was kept
 * for this day. So a parent is judged crash-looping, and stops counting as running, when:
 *
 * - its spec is unproven: a candidate waits to be promoted (lib/core/promotion.ts), so the
 *   checkpoint keeps another version, which ran Ready; a parent running the kept spec is never
 *   judged (a copy of the same spec would do no better);
 * - it is not Ready (parentReadiness, as the API server or the kubelet has its pod; a pod no
 *   source can show, the kubelet refusing the agent while the API server is gone, is not);
 * - for at least crashLoopAfter since it was first seen so, the runtime showed its containers
 *   restarted (a container's attempt rose), and none of them runs at the pass that judges it:
 *   exiting again and again.
 *
 * The pods judged are the runtime's, named by its labels: what the node shows, whatever the
 * API server or the kubelet can say.
 *
 * Once judged, a parent stays judged until it is Ready, its spec is promoted or it is gone: its
 * copy is what serves while it crash-loops, and on the host network its attempts then fail on
 * the copy's port, which must not read as anything but crash-looping. A new pod of the same
 * controller is another parent, judged afresh: it supersedes the checkpoint it inherited from
 * (docs/design.md#lineage), so that its copy frees the ports for it to prove itself.
 *
 * The judgment lives in the daemon's memory: `--once` judges nothing. An agent restarted while
 * a copy is active for a crash loop (its status record says so) judges that parent again at once.
 */
import type { Instant } from "../core/time.ts";
import { millisToDuration } from "../core/time.ts";

/** A pod the runtime runs, as the judgment sees it. */
export interface CrashLoopPod {
  /** `namespace/name`, from the runtime's labels. */
  id: string;
  uid: string;
  /** The runtime's restart attempts (RunningPod.restarts). */
  restarts: number;
  /** A container of it runs at this moment. */
  containerRunning: boolean;
  /** Ready as its pod object says (parentReadiness); false when no source has the object. */
  ready: boolean;
}

/** What the judgment of one pass reads. */
export interface CrashLoopInput {
  now: Instant;
  crashLoopAfterMs: number;
  /** What the runtime runs; undefined when it did not answer: nothing is judged anew. */
  pods: readonly CrashLoopPod[] | undefined;
  /** The version a parent's checkpoint keeps while its unproven spec waits; undefined: none. */
  keptWhileUnproven(id: string): number | undefined;
  /**
   * Parents judged by the agent before it restarted, with the version their checkpoint keeps
   * (their copy active for it, as its status record says): judged again at once, rather than
   * withdrawn until the next restart the runtime shows, up to the kubelet's 5 minutes.
   */
  judgedBefore?: ReadonlyMap<string, number>;
}

interface Seen {
  id: string;
  /** When the pass first saw it unproven and not Ready. */
  since: Instant;
  /** Its containers' restarts then. */
  restarts: number;
  judged: boolean;
}

export class CrashLoops {
  /** By pod uid: a rollout's new pod is another pod, judged afresh. */
  #seen = new Map<string, Seen>();

  /**
   * The parents judged crash-looping this pass, by id, with the version their checkpoint keeps:
   * what the planner reads (PassInput's `crashLooping`).
   */
  judge(input: CrashLoopInput): Record<string, number> {
    // The planner holds every state when the runtime did not answer: nothing to judge by.
    if (input.pods === undefined) return {};
    const after = millisToDuration(input.crashLoopAfterMs);
    const seen = new Map<string, Seen>();
    const judged: Record<string, number> = {};
    for (const pod of input.pods) {
      const before = input.judgedBefore?.get(pod.id);
      const kept = input.keptWhileUnproven(pod.id) ?? before;
      if (kept === undefined || pod.ready) continue;
      const entry = this.#seen.get(pod.uid) ??
        { id: pod.id, since: input.now, restarts: pod.restarts, judged: before !== undefined };
      // A container that runs at this moment may be one that has come up at last: judged on a
      // pass that finds it exited again.
      entry.judged ||= input.now - entry.since >= after && pod.restarts > entry.restarts &&
        !pod.containerRunning;
      seen.set(pod.uid, entry);
      if (entry.judged) judged[pod.id] = kept;
    }
    // A judged pod missing from this pass's list keeps its judgment while its spec still waits:
    // the planner sees it not running anyway, and it may be back.
    const listed = new Set(input.pods.map((pod) => pod.uid));
    for (const [uid, entry] of this.#seen) {
      if (entry.judged && !listed.has(uid) && input.keptWhileUnproven(entry.id) !== undefined) {
        seen.set(uid, entry);
      }
    }
    this.#seen = seen;
    return judged;
  }
}
