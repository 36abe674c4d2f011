/**
 * Stalled starts, judged at the end of a pass: a checkpoint the agent has kept started for
 * `startTimeout` since it last activated it, whose copy the runtime does not show running. The
 * node then looks protected and is not: the copy was handed to the kubelet and nothing came of
 * it. "Running" is what it is for parents (lib/sources/cri.ts, runningPods): a copy that the
 * kubelet made and that crash-loops is not stalled, it is the copy's own problem.
 *
 * Judged only when the runtime answered this pass: without it the agent cannot tell what runs,
 * and says so as a runtime failure instead.
 */
import type { Config } from "../config/types.ts";
import { copyPodId } from "../core/ids.ts";
import { asArray, type Json } from "../core/json.ts";
import type { Pod } from "../core/pod.ts";
import { type Clock, type Instant, millisToDuration, parseInstant } from "../core/time.ts";
import { formatDuration } from "../config/duration.ts";
import type { RunningPod } from "../sources/cri.ts";
import type { StatusRecord } from "../store/status_record.ts";
import type { Logger } from "../util/log.ts";
import { ProblemLog } from "./problem_log.ts";

export interface StalledStart {
  /** The checkpoint, `namespace/name`. */
  id: string;
  /** When the agent last activated it: its status record's lastActivatedAt. */
  activeSince: string;
  /** What the kubelet would run the copy as, and does not. */
  copy: string;
}

export interface StallInput {
  /** Each checkpoint's status record after this pass. */
  records: readonly StatusRecord[];
  /** The checkpoints this pass left started (their manifests are in the static-pod dir). */
  started: ReadonlySet<string>;
  /** What the runtime runs; undefined when it did not answer this pass. */
  running: readonly RunningPod[] | undefined;
  nodeName: string;
  now: Instant;
  startTimeoutMs: number;
}

/** From when a checkpoint activated at `lastActivatedAt` without a running copy is stalled. */
export function startTimeoutEnd(lastActivatedAt: string, startTimeoutMs: number): Instant {
  return parseInstant(lastActivatedAt)! + millisToDuration(startTimeoutMs);
}

/** The started checkpoints active for startTimeout whose copy does not run, by id. */
export function stalledStarts(input: StallInput): StalledStart[] {
  if (input.running === undefined) return [];
  const running = new Set(input.running.map((pod) => `${pod.namespace}/${pod.name}`));
  const stalled: StalledStart[] = [];
  for (const record of input.records) {
    if (!input.started.has(record.id) || record.lastActivatedAt === undefined) continue;
    const copy = copyPodId(record.id, input.nodeName);
    if (input.now < startTimeoutEnd(record.lastActivatedAt, input.startTimeoutMs)) continue;
    if (running.has(copy)) continue;
    stalled.push({ id: record.id, activeSince: record.lastActivatedAt, copy });
  }
  return stalled;
}

/** The images a pod's containers run, in order, each once. */
export function imagesOf(pod: Pod | undefined): string[] {
  const spec = (pod?.spec ?? {}) as Json;
  const containers = [...asArray(spec.initContainers), ...asArray(spec.containers)];
  return [...new Set(containers.map((c) => c.image).filter((i) => typeof i === "string"))];
}

/**
 * What the log says about stalled starts (problem_log.ts): an error once per stall (a checkpoint
 * activated anew and stalled again is a new stall), naming the likely causes, and a line when it
 * ends.
 */
export class StalledStartLog {
  readonly #stalls: ProblemLog;

  constructor(
    private readonly config: Pick<Config, "staticPodDir" | "startTimeoutMs">,
    log: Logger,
    clock: Clock,
  ) {
    this.#stalls = new ProblemLog(
      log,
      clock,
      "stalled start over: the copy runs, or the checkpoint is no longer active",
    );
  }

  /**
   * This pass's judgement; `undefined` when nothing was judged (the runtime did not answer),
   * which neither starts nor ends a stall. `manifestOf` gives a checkpoint's manifest, for its
   * file name and images.
   */
  judged(
    stalled: readonly StalledStart[] | undefined,
    manifestOf: (id: string) => { file?: string; pod?: Pod },
  ) {
    if (stalled === undefined) return;
    const key = (s: StalledStart) => `${s.id} ${s.activeSince}`;
    this.#stalls.settle(new Set(stalled.map(key)));
    for (const s of stalled) {
      const manifest = manifestOf(s.id);
      this.#stalls.there(key(s), {
        level: "error",
        msg: `stalled start: the checkpoint has been active for ${
          formatDuration(this.config.startTimeoutMs)
        } or more and the runtime runs no copy of it`,
        about: { checkpoint: s.id },
        fields: {
          activeSince: s.activeSince,
          copy: s.copy,
          likelyCauses: this.#causes(manifest.file, imagesOf(manifest.pod)),
        },
      });
    }
  }

  #causes(file: string | undefined, images: string[]): string[] {
    const dir = this.config.staticPodDir;
    const imageList = images.length > 0 ? ` (${images.join(", ")})` : "";
    return [
      `the kubelet does not read static pods from ${dir} (its staticPodPath or ` +
      "--pod-manifest-path names another directory): `ckpt-agent doctor` checks this",
      `an image the copy runs${imageList} is not on the node, and cannot be pulled while the ` +
      "control plane is down: see `crictl images`",
      `the kubelet refuses the manifest ${file ?? `in ${dir}`}: see its log ` +
      "(`journalctl -u kubelet`)",
    ];
  }
}
