/**
 * Observe, the first phase of a pass: ask the API server, the kubelet and the runtime, and read
 * both manifest dirs and the states of the previous pass, building exactly the snapshot
 * `ckpt-agent plan` reads. A failed source is flagged in the snapshot, never faked.
 */
import type { Config } from "../config/types.ts";
import type { ManifestListing } from "../core/manifest_names.ts";
import type { PassInput } from "../core/pass.ts";
import { inNamespaces, type Pod } from "../core/pod.ts";
import type { CheckpointState } from "../core/state.ts";
import { type Clock, millisToDuration } from "../core/time.ts";
import { manifestCache, manifestIndex, readManifestDir } from "../disk/manifests.ts";
import type { RunningPod } from "../sources/cri.ts";
import type { NodeSources } from "../sources/node.ts";
import type { SourceFailure, SourceResult } from "../sources/types.ts";
import { stateOfRecord, type StatusRecord } from "../store/status_record.ts";
import { readStatusRecords } from "../store/status_store.ts";

/**
 * Where the previous pass's states come from: what the agent holds, or a read-only look at the
 * status store.
 */
export type TrackedStateReader = () => Promise<Map<string, CheckpointState>>;

function trackedStates(records: StatusRecord[]): Map<string, CheckpointState> {
  return new Map(records.map((r) => [r.id, stateOfRecord(r)]));
}

/**
 * The states the agent holds (AgentStores.status): the last pass's, whether or not they could
 * be recorded, and the status store's before the first pass. Planning from what is on disk
 * instead would restart a grace period on every pass while the state dir cannot be written.
 */
export function trackedFromStore(status: { list(): StatusRecord[] }): TrackedStateReader {
  return () => Promise.resolve(trackedStates(status.list()));
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
}

function runningAsPod(r: RunningPod): Pod {
  return { metadata: { namespace: r.namespace, name: r.name, uid: r.uid } };
}

function valueOr<T>(result: SourceResult<T>, failures: SourceFailure[]): T | undefined {
  if (result.ok) return result.value;
  failures.push(result.failure);
  return undefined;
}

export class Observer {
  /** Both manifest directories as last read: an unchanged file is not read and parsed again. */
  readonly #manifestCaches = { active: manifestCache(), inactive: manifestCache() };

  constructor(
    private readonly config: Config,
    private readonly sources: NodeSources,
    private readonly clock: Clock,
  ) {}

  /** Asks every source at once. */
  async observe(readTracked: TrackedStateReader): Promise<Observation> {
    const { config, sources } = this;
    const now = this.clock.now();
    const [api, kubelet, runtime, active, inactive, tracked] = await Promise.all([
      sources.apiServer.listNodePods(config.nodeName),
      sources.kubelet.listPods(),
      sources.runtime.listRunningPods(),
      readManifestDir(config.staticPodDir, this.#manifestCaches.active),
      readManifestDir(config.inactiveDir, this.#manifestCaches.inactive),
      readTracked(),
    ]);
    const failures: SourceFailure[] = [];
    const keep = inNamespaces(config.namespaces);
    const apiPods = valueOr(api, failures);
    const kubeletPods = valueOr(kubelet, failures);
    const running = valueOr(runtime, failures);
    return {
      input: {
        now,
        gracePeriod: millisToDuration(config.checkpointGracePeriodMs),
        self: config.self,
        observations: {
          apiAvailable: apiPods !== undefined,
          kubeletAvailable: kubeletPods !== undefined,
          runtimeAvailable: running !== undefined,
          apiParents: (apiPods ?? []).filter(keep),
          localParents: (kubeletPods ?? []).filter(keep),
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
    };
  }
}
