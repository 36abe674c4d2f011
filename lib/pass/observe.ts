/**
 * Observe, the first phase of a pass: ask the API server, the kubelet and the runtime, and read
 * both manifest dirs and the states of the previous pass, building exactly the snapshot
 * `ckpt-agent plan` reads. A failed source is flagged in the snapshot, never faked.
 */
import type { Config } from "../config/types.ts";
import type { ManifestListing } from "../core/manifest_names.ts";
import type { PassInput } from "../core/pass.ts";
import { isCheckpoint, type Pod, podId } from "../core/pod.ts";
import type { CheckpointState } from "../core/state.ts";
import { type Clock, millisToDuration } from "../core/time.ts";
import {
  manifestCache,
  type ManifestDir,
  manifestIndex,
  readManifestDir,
} from "../disk/manifests.ts";
import type { RunningPod } from "../sources/cri.ts";
import type { KubeletPods } from "../sources/kubelet.ts";
import type { NodeSources } from "../sources/node.ts";
import { type SourceFailure, type SourceResult, succeeded } from "../sources/types.ts";
import { stateOfRecord, type StatusRecord } from "../store/status_record.ts";
import { deepFreeze } from "../util/frozen.ts";
import { readStatusRecords } from "../store/status_store.ts";

/**
 * Where the previous pass's states come from: what the agent holds, or a read-only look at the
 * status store.
 */
export type TrackedStateReader = () => Promise<Map<string, CheckpointState>>;

function trackedStates(records: readonly StatusRecord[]): Map<string, CheckpointState> {
  return new Map(records.map((r) => [r.id, stateOfRecord(r)]));
}

/**
 * The states the agent holds (AgentStores.status): the last pass's, whether or not they could
 * be recorded, and the status store's before the first pass. Planning from what is on disk
 * instead would restart a grace period on every pass while the state dir cannot be written.
 */
export function trackedFromStore(
  status: { peekAll(): readonly StatusRecord[] },
): TrackedStateReader {
  return () => Promise.resolve(trackedStates(status.peekAll()));
}

/** For passes that write nothing: the store's directory is read, never opened. */
export function trackedFromDisk(stateDir: string): TrackedStateReader {
  return async () => trackedStates(await readStatusRecords(stateDir));
}

export interface Observation {
  input: PassInput;
  failures: SourceFailure[];
  running: RunningPod[];
  /** Manifest files that are not pods: reported, never touched. */
  manifestProblems: { file: string; problem: string }[];
  /** Every file in both manifest dirs when they were read, and the checkpoint each holds. */
  manifestFiles: ManifestListing;
  /**
   * The pass is at rest and a watch of the manifest dirs told no change since the last pass
   * looked at them: every file there is as that pass found it (the dirs were not read again).
   */
  manifestDirsQuiet: boolean;
  /** The API server's answer came from the pods' watch, not from a request. */
  apiWatched: boolean;
  /** The kubelet's and the runtime's answers, as they came (see NodeAnswers). */
  node: NodeAnswers;
}

/**
 * What the kubelet and the runtime answered. Their clients give back the same value (by identity)
 * for the same bytes (lib/sources/answer_memo.ts), so a pass can tell that neither changed.
 */
export interface NodeAnswers {
  kubelet: SourceResult<KubeletPods>;
  runtime: SourceResult<RunningPod[]>;
}

/**
 * Whether two answers of the node are the same: the runtime's by identity of what it answered;
 * the kubelet's so, or the same failure (without the API server, a kubelet refuses the agent).
 */
export function sameNodeAnswers(a: NodeAnswers, b: NodeAnswers): boolean {
  const kubelet = a.kubelet.ok && b.kubelet.ok
    ? a.kubelet.value.pods === b.kubelet.value.pods &&
      a.kubelet.value.verified === b.kubelet.value.verified
    : !a.kubelet.ok && !b.kubelet.ok && a.kubelet.failure.kind === b.kubelet.failure.kind &&
      a.kubelet.failure.message === b.kubelet.failure.message;
  return kubelet && a.runtime.ok && b.runtime.ok && a.runtime.value === b.runtime.value;
}

function runningAsPod(r: RunningPod): Pod {
  return { metadata: { namespace: r.namespace, name: r.name, uid: r.uid } };
}

function valueOr<T>(result: SourceResult<T>, failures: SourceFailure[]): T | undefined {
  if (result.ok) return result.value;
  failures.push(result.failure);
  return undefined;
}

/**
 * At rest: every parent the agent checkpoints runs on this node (as the runtime says), in the
 * inactive state, and no checkpoint is in the static-pod dir. Then what the API server says of
 * the parents decides nothing that cannot wait for the next change of it.
 */
export function atRest(
  tracked: ReadonlyMap<string, CheckpointState>,
  running: readonly RunningPod[] | undefined,
  staticPods: readonly Pod[],
): boolean {
  if (running === undefined || staticPods.some(isCheckpoint)) return false;
  const runningIds = new Set(running.map((r) => podId(runningAsPod(r))));
  for (const [id, state] of tracked) {
    if (state.name !== "inactive" || !runningIds.has(id)) return false;
  }
  return true;
}

export class Observer {
  /** Both manifest directories as last read: an unchanged file is not read and parsed again. */
  readonly #manifestCaches = { active: manifestCache(), inactive: manifestCache() };
  /** Both manifest directories as the last pass saw them, and the watch's `quiet` before. */
  #dirs?: { quiet: number; active: ManifestDir; inactive: ManifestDir };

  constructor(
    private readonly config: Config,
    private readonly sources: NodeSources,
    private readonly clock: Clock,
  ) {}

  /** Asks the kubelet and the runtime at once. */
  async askNode(): Promise<NodeAnswers> {
    const [kubelet, runtime] = await Promise.all([
      this.sources.kubelet.listPods(),
      this.sources.runtime.listRunningPods(),
    ]);
    return { kubelet, runtime };
  }

  /**
   * Asks every source at once; the API server itself only when its watch cannot answer.
   * `dirsQuiet`: the manifest dirs' watch's `quiet` now (lib/daemon/dir_watch.ts), if they are
   * watched; the same as the last pass's, and the pass at rest, the dirs are not read again.
   * `asked`: the kubelet's and the runtime's answers, when the pass has them already.
   */
  async observe(
    readTracked: TrackedStateReader,
    dirsQuiet?: number,
    asked?: NodeAnswers,
  ): Promise<Observation> {
    const { config, sources } = this;
    const now = this.clock.now();
    // Without a watch in sync, only the API server can tell: asked with the others.
    const listing = sources.apiServer.watchedNodePods?.(config.nodeName) === undefined
      ? sources.apiServer.listNodePods(config.nodeName)
      : undefined;
    const known = listing === undefined && dirsQuiet !== undefined &&
        this.#dirs?.quiet === dirsQuiet
      ? this.#dirs
      : undefined;
    const [node, dirs, tracked] = await Promise.all([
      asked ?? this.askNode(),
      known ?? this.#readDirs(),
      readTracked(),
    ]);
    const { kubelet, runtime } = node;
    const running = runtime.ok ? runtime.value : undefined;
    const answer = listing
      ? { api: await listing, watched: false }
      : await this.#watchedOrListed(tracked, running, dirs.active.pods);
    const { api } = answer;
    // Only a pass at rest goes without reading the dirs: any other may be a failover.
    const quiet = known !== undefined && answer.watched;
    const { active, inactive } = known && !quiet ? await this.#readDirs() : dirs;
    this.#dirs = dirsQuiet === undefined ? undefined : { quiet: dirsQuiet, active, inactive };
    const failures: SourceFailure[] = [];
    const apiPods = valueOr(api, failures);
    const kubeletPods = valueOr(kubelet, failures);
    valueOr(runtime, failures);
    return {
      input: {
        now,
        gracePeriod: millisToDuration(config.checkpointGracePeriodMs),
        self: config.self,
        namespaces: config.namespaces,
        observations: {
          apiAvailable: apiPods !== undefined,
          kubeletAvailable: kubeletPods !== undefined,
          kubeletVerified: kubeletPods?.verified ?? false,
          runtimeAvailable: running !== undefined,
          ...(failures.some((f) => f.kind === "not-permitted") ? { ownFailure: true } : {}),
          apiParents: apiPods ?? [],
          localParents: kubeletPods?.pods ?? [],
          localRunning: (running ?? []).map(runningAsPod),
          activeCheckpoints: active.pods,
          inactiveCheckpoints: inactive.pods,
        },
        tracked,
      },
      failures,
      running: running ?? [],
      manifestProblems: [...active.problems, ...inactive.problems],
      manifestFiles: { active: manifestIndex(active), inactive: manifestIndex(inactive) },
      manifestDirsQuiet: quiet,
      apiWatched: answer.watched,
      node,
    };
  }

  async #readDirs(): Promise<{ active: ManifestDir; inactive: ManifestDir }> {
    const [active, inactive] = await Promise.all([
      readManifestDir(this.config.staticPodDir, this.#manifestCaches.active),
      readManifestDir(this.config.inactiveDir, this.#manifestCaches.inactive),
    ]);
    return { active, inactive };
  }

  /**
   * The node's pods from the watch, at rest only; otherwise from a fresh list (a quorum read).
   * An API server whose etcd is gone may keep its watches open from its cache while every list
   * fails with 503: answering from the watch then would vouch for an etcd that is not running,
   * its checkpoint would never be activated, and the control plane would never come back.
   */
  async #watchedOrListed(
    tracked: ReadonlyMap<string, CheckpointState>,
    running: readonly RunningPod[] | undefined,
    staticPods: readonly Pod[],
  ): Promise<{ api: SourceResult<Pod[]>; watched: boolean }> {
    const { config, sources } = this;
    // Asked again, not taken from observe's first look: the watch may have broken meanwhile.
    const watched = sources.apiServer.watchedNodePods?.(config.nodeName);
    if (watched !== undefined && atRest(tracked, running, staticPods)) {
      // The watch replaces a pod it holds when the pod changes, never changes it: frozen, an
      // unchanged pod is the same object from pass to pass, and what a pass derives from it
      // can be kept (lib/pass/checkpoints.ts).
      for (const pod of watched) deepFreeze(pod);
      return { api: succeeded(watched), watched: true };
    }
    return { api: await sources.apiServer.listNodePods(config.nodeName), watched: false };
  }
}
