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
 * - it is not Ready (parentReadiness, as the kubelet last said it, with the runtime behind it);
 * - and for at least crashLoopAfter since it was first seen so, the runtime showed its
 *   containers restarted (a container's attempt rose): exiting again and again.
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
import { type Pod, podId } from "../core/pod.ts";
import { parentReadiness } from "../core/promotion.ts";
import type { RunningPod } from "../sources/cri.ts";

/** What the judgment of one pass reads. */
export interface CrashLoopInput {
  now: Instant;
  crashLoopAfterMs: number;
  /** The parents of the pass, each as the object whose spec is checkpointed. */
  parents: readonly Pod[];
  /** What the runtime runs; undefined when it did not answer: nothing is judged anew. */
  running: readonly RunningPod[] | undefined;
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
    if (input.running === undefined) return {};
    const runtime = new Map(input.running.map((pod) => [pod.uid, pod]));
    const after = millisToDuration(input.crashLoopAfterMs);
    const seen = new Map<string, Seen>();
    const judged: Record<string, number> = {};
    for (const parent of input.parents) {
      const uid = parent.metadata.uid;
      const id = podId(parent);
      const before = input.judgedBefore?.get(id);
      const kept = input.keptWhileUnproven(id) ?? before;
      if (uid === undefined || kept === undefined) continue;
      const running = runtime.get(uid);
      if (!running) {
        // Not running at all this pass, which the planner sees as it is: a judgment stays.
        const earlier = this.#seen.get(uid);
        if (earlier) seen.set(uid, earlier);
        continue;
      }
      if (parentReadiness(parent, { running: true, active: false }).ready) continue;
      const entry = this.#seen.get(uid) ??
        { since: input.now, restarts: running.restarts, judged: before !== undefined };
      entry.judged ||= input.now - entry.since >= after && running.restarts > entry.restarts;
      seen.set(uid, entry);
      if (entry.judged) judged[id] = kept;
    }
    this.#seen = seen;
    return judged;
  }
}
