/**
 * One reconcile pass over the real node: observe → plan → apply → persist.
 *
 * - observe: ask the API server, the kubelet and the runtime, and read both manifest dirs and the
 *   status store, building exactly the snapshot `ckpt-agent plan` reads;
 * - plan: the pure planner (lib/core/pass.ts);
 * - apply: write checkpoints of the parents seen, then stop, start and remove (DESIGN §2.4 step 5),
 *   converging every tracked checkpoint to its action;
 * - persist: one status record per tracked checkpoint, and the sandboxes of active checkpoints.
 *
 * Every byte the agent writes is written by a function this file calls directly.
 */
import type { Config } from "./config/types.ts";
import { parseValidId } from "./core/ids.ts";
import {
  assignManifestNames,
  filesHolding,
  type ManifestListing,
  type ManifestNames,
} from "./core/manifest_names.ts";
import { type PassInput, type PassResult, runPass, type StateChange } from "./core/pass.ts";
import type { Pod } from "./core/pod.ts";
import { explainChange } from "./core/reasons.ts";
import { fileOwner, podFileDirs, sanitizeCheckpoint } from "./core/sanitize.ts";
import { type PlanDocument, planDocument } from "./core/snapshot.ts";
import { type Action, actionOf, type CheckpointState } from "./core/state.ts";
import { type Clock, formatInstant, type Instant, NANOS_PER_MILLI } from "./core/time.ts";
import { sweepTempFiles, totalBytesWritten } from "./disk/atomic_write.ts";
import { separateMounts } from "./disk/mounts.ts";
import {
  activateCheckpoint,
  checkpointPaths,
  deactivateCheckpoint,
  manifestCache,
  manifestIndex,
  type ManifestPaths,
  readManifestDir,
  removeCheckpoint,
  writeInactiveManifest,
} from "./disk/manifests.ts";
import {
  type ObjectData,
  objectKey,
  removeStaleVolumeDirs,
  writeVolumeFiles,
} from "./disk/pod_files.ts";
import { VerifiedFiles } from "./disk/verified_files.ts";
import type { Logger } from "./util/log.ts";
import type { RunningPod } from "./sources/cri.ts";
import type { NodeSources } from "./sources/node.ts";
import {
  type FailureKind,
  isConfigurationFailure,
  type SourceFailure,
  type SourceName,
  type SourceResult,
} from "./sources/types.ts";
import type { AgentStores, StoreName, Unrecorded } from "./store/agent_stores.ts";
import { mapConcurrent } from "./util/map_concurrent.ts";
import { SANDBOX_CHECKPOINT_VERSION } from "./store/sandbox_checkpoint.ts";
import { stateOfRecord, type StatusRecord, type StoredStatus } from "./store/status_record.ts";
import { readStatusRecords } from "./store/status_store.ts";

/**
 * Where the previous pass's states come from: what the agent holds, or a read-only look at the
 * status store.
 */
export type TrackedStateReader = () => Promise<Map<string, CheckpointState>>;

function trackedStates(records: StoredStatus[]): Map<string, CheckpointState> {
  return new Map(records.map((r) => [r.id, stateOfRecord(r)]));
}

/**
 * The states the agent holds (AgentStores.status): the last pass's, whether or not they could
 * be recorded, and the status store's before the first pass. Planning from what is on disk
 * instead would restart a grace period on every pass while the state dir cannot be written.
 */
export function trackedFromStore(status: { list(): StoredStatus[] }): TrackedStateReader {
  return () => Promise.resolve(trackedStates(status.list()));
}

/** For passes that write nothing: the store's directory is read, never opened. */
export function trackedFromDisk(stateDir: string): TrackedStateReader {
  return async () => trackedStates(await readStatusRecords(stateDir));
}

export interface AgentOptions {
  config: Config;
  sources: NodeSources;
  clock: Clock;
  log: Logger;
  /**
   * Told of each action as soon as it is done (and durable), before the pass goes on; for
   * measuring, e.g. how long a checkpoint takes to reach the kubelet (bench/pass_bench.ts).
   */
  onApplied?: (action: AppliedAction) => void;
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

export interface AppliedAction {
  op: "checkpoint" | "files" | "start" | "stop" | "remove" | "sandbox-record" | "sandbox-forget";
  id: string;
  detail?: string;
}

export interface PassError {
  op: string;
  id?: string;
  message: string;
}

export interface PassReport {
  startedAt: string;
  durationMs: number;
  /** A complete pass: every source answered and every write succeeded. */
  complete: boolean;
  failures: SourceFailure[];
  plan: PlanDocument;
  changes: { id: string; from: string; to: string; reason: string; message: string }[];
  applied: AppliedAction[];
  errors: PassError[];
  /** Everything the pass wrote: manifests, stored files, status and sandbox records. */
  bytesWritten: number;
}

/** What working on one checkpoint adds to the pass report. */
type Outcome = Pick<PassReport, "applied" | "errors">;

/**
 * Checkpoints worked on at once. Each one's files are its own, but every Deno file call waits
 * for a thread-pool round trip: one after the other, a steady pass over 1,000 parents spent most
 * of its time waiting (docs/benchmarks.md, "Node pass"). It also bounds the connections a
 * refresh opens to the API server at once.
 */
const CHECKPOINTS_IN_FLIGHT = 8;

/** What one pass's refresh of secrets and configmaps has learnt so far. */
interface Refresh {
  apiUnavailable: boolean;
}

/** Failures of a GET that say the API server cannot answer now, rather than about one object. */
const API_UNAVAILABLE: ReadonlySet<FailureKind> = new Set<FailureKind>([
  "unreachable",
  "timeout",
  "server-error",
  "bad-response",
]);

function millis(ms: number): bigint {
  return BigInt(Math.round(ms)) * NANOS_PER_MILLI;
}

function inNamespaces(config: Config) {
  const allowed = new Set(config.namespaces);
  return (pod: Pod) => allowed.size === 0 || allowed.has(pod.metadata.namespace);
}

function runningAsPod(r: RunningPod): Pod {
  return { metadata: { namespace: r.namespace, name: r.name, uid: r.uid } };
}

function valueOr<T>(result: SourceResult<T>, failures: SourceFailure[]): T | undefined {
  if (result.ok) return result.value;
  failures.push(result.failure);
  return undefined;
}

/** The kubelet runs a static pod `<name>` as `<name>-<nodeName>`. */
function staticPodName(id: string, nodeName: string): string {
  return `${id.split("/")[1]}-${nodeName}`;
}

/** The parents whose checkpoints this pass writes. */
function checkpointedIds(result: PassResult): string[] {
  return [...result.parents.keys()].filter((id) => result.tracked.has(id) && parseValidId(id));
}

/** What each tracked checkpoint must look like on disk after this pass. */
export function desiredActions(result: PassResult): Map<string, Action> {
  const desired = new Map<string, Action>();
  for (const [id, state] of result.tracked) desired.set(id, actionOf(state));
  // A self cascade reports checkpoints stopped while their states stay as they were.
  for (const id of result.stops) desired.set(id, "stop");
  for (const id of result.starts) desired.set(id, "start");
  for (const id of result.removes) desired.set(id, "remove");
  return desired;
}

/** The status record of a checkpoint after this pass; pure, so it can be tested by table. */
export function nextStatusRecord(
  current: StatusRecord | undefined,
  id: string,
  state: CheckpointState,
  change: StateChange | undefined,
  now: Instant,
): StatusRecord {
  const at = formatInstant(now);
  const explained = change ? explainChange(change) : {
    reason: current?.reason ?? "Discovered",
    message: current?.message ?? "found on this node",
  };
  const before = change
    ? actionOf(change.from)
    : current
    ? actionOf(stateOfRecord(current))
    : "none";
  const after = actionOf(state);
  const record: StatusRecord = {
    id,
    state: state.name as StatusRecord["state"],
    createdAt: current?.createdAt ?? at,
    reason: explained.reason,
    message: explained.message,
  };
  if ("graceEnd" in state) record.graceEnd = formatInstant(state.graceEnd);
  const activated = after === "start" && before !== "start" ? at : current?.lastActivatedAt;
  const deactivated = after === "stop" && before === "start" ? at : current?.lastDeactivatedAt;
  if (activated) record.lastActivatedAt = activated;
  if (deactivated) record.lastDeactivatedAt = deactivated;
  return record;
}

/** The pass-error ops of records the state dir could not take; the others are checkpoint writes. */
export const RECORD_OPS = ["status", "sandbox-record", "sandbox-forget"] as const;

function recordOp(u: Unrecorded): typeof RECORD_OPS[number] {
  if (u.store === "status") return "status";
  return u.op === "write" ? "sandbox-record" : "sandbox-forget";
}

function recordMatches(record: StatusRecord | undefined, state: CheckpointState): boolean {
  if (!record) return false;
  return record.state === state.name &&
    record.graceEnd === ("graceEnd" in state ? formatInstant(state.graceEnd) : undefined);
}

export class Agent {
  readonly #opts: AgentOptions;
  readonly #paths: ManifestPaths;
  /** Per parent: when its secrets and configmaps were last stored. */
  readonly #refreshedAt = new Map<string, Instant>();
  /** Per parent: the sanitizer's warnings last logged, so that each is said once. */
  readonly #warned = new Map<string, string>();
  /** Inactive manifests known to be what their parent (the key) makes of them. */
  readonly #checkedManifests = new VerifiedFiles();
  /** Both manifest directories as last read: an unchanged file is not read and parsed again. */
  readonly #manifestCaches = { active: manifestCache(), inactive: manifestCache() };
  /** Per parent: the file name it got because bootkube's was taken, once said. */
  readonly #saidNames = new Map<string, string>();
  /** Whether this process has swept both manifest dirs of temp files a crash left. */
  #swept = false;
  /** Whether this process has looked at the manifest dirs' mounts (#warnIfActivationCopies). */
  #mountsChecked = false;
  /** The manifest file name of every checkpoint, as the last pass that wrote assigned them. */
  #manifestFiles: ReadonlyMap<string, string> = new Map();
  /** Passes so far, and the failures logged (source/kind/problem) with the pass last seen in. */
  #passes = 0;
  readonly #problemsSeen = new Map<string, number>();
  /** Sources whose observation failed in the previous pass. */
  #failingSources = new Set<SourceName>();

  constructor(opts: AgentOptions) {
    this.#opts = opts;
    const c = opts.config;
    this.#paths = {
      staticPodDir: c.staticPodDir,
      inactiveDir: c.inactiveDir,
      secretsDir: c.secretsDir,
      configmapsDir: c.configmapsDir,
    };
  }

  /** The file name of a checkpoint's manifests; undefined before a pass has placed it. */
  manifestFileOf(id: string): string | undefined {
    return this.#manifestFiles.get(id);
  }

  /** Asks every source at once; a failed source is flagged in the snapshot, never faked. */
  async observe(readTracked: TrackedStateReader): Promise<Observation> {
    const { config, sources, clock } = this.#opts;
    const now = clock.now();
    const [api, kubelet, runtime, active, inactive, tracked] = await Promise.all([
      sources.apiServer.listNodePods(config.nodeName),
      sources.kubelet.listPods(),
      sources.runtime.listRunningPods(),
      readManifestDir(config.staticPodDir, this.#manifestCaches.active),
      readManifestDir(config.inactiveDir, this.#manifestCaches.inactive),
      readTracked(),
    ]);
    const failures: SourceFailure[] = [];
    const keep = inNamespaces(config);
    const apiPods = valueOr(api, failures);
    const kubeletPods = valueOr(kubelet, failures);
    const running = valueOr(runtime, failures);
    return {
      input: {
        now,
        gracePeriod: millis(config.checkpointGracePeriodMs),
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

  /** A full pass. With `stores` undefined (dry run) nothing is written. */
  async pass(
    stores: AgentStores | undefined,
    readTracked: TrackedStateReader,
  ): Promise<PassReport> {
    const { clock, log } = this.#opts;
    const started = clock.now();
    const bytesBefore = totalBytesWritten();
    const obs = await this.observe(readTracked);
    const apiAvailable = obs.input.observations.apiAvailable;
    this.#logFailures(obs.failures, apiAvailable);
    for (const p of obs.manifestProblems) log.warn("manifest is not a pod; left alone", p);

    const result = runPass(obs.input);
    const report: PassReport = {
      startedAt: formatInstant(started),
      durationMs: 0,
      complete: obs.failures.length === 0,
      failures: obs.failures,
      plan: planDocument(result),
      changes: result.changes.map((change) => ({
        id: change.id,
        from: change.from.name,
        to: change.to.name,
        ...explainChange(change),
      })),
      applied: [],
      errors: [],
      bytesWritten: 0,
    };
    for (const change of report.changes) log.info("state change", change);

    if (stores) {
      this.#warnIfActivationCopies();
      await this.#sweepOnce();
      // Before any write: two checkpoints written at once must never target one file.
      const names = assignManifestNames(checkpointedIds(result), obs.manifestFiles);
      this.#manifestFiles = names.names;
      this.#sayNames(names);
      await this.#checkpointParents(result, obs, names, report);
      await this.#applyActions(result, obs, names, report);
      this.#trackStatus(stores, result, obs.input.now);
      if (obs.input.observations.runtimeAvailable) {
        await this.#trackSandboxes(stores, result, obs.running);
      }
      await this.#persist(stores, report);
    }
    if (report.errors.length > 0) report.complete = false;
    report.bytesWritten = totalBytesWritten() - bytesBefore;
    report.durationMs = Number(clock.now() - started) / 1e6;
    return report;
  }

  /** The observation's failures, once per pass; also says which sources answer again. */
  #logFailures(failures: SourceFailure[], apiAvailable: boolean) {
    this.#passes++;
    for (const [problem, pass] of this.#problemsSeen) {
      if (pass < this.#passes - 1) this.#problemsSeen.delete(problem);
    }
    const failing = new Set(failures.map((failure) => failure.source));
    for (const source of this.#failingSources) {
      if (!failing.has(source)) this.#opts.log.info("source answers again", { source });
    }
    this.#failingSources = failing;
    for (const failure of failures) this.#logFailure(failure, apiAvailable);
  }

  /**
   * A failure is said at warn (error when the configuration must change) when it is new: not
   * seen, with the same source, kind and problem, in this pass or the previous one. While it
   * repeats it is said at debug, so a node in an outage does not log the same lines every pass.
   */
  #logFailure(failure: SourceFailure, apiAvailable: boolean) {
    const { log } = this.#opts;
    const problem = `${failure.source}/${failure.kind}/${failure.problem ?? failure.message}`;
    const seen = this.#problemsSeen.has(problem);
    this.#problemsSeen.set(problem, this.#passes);
    const fields = { source: failure.source, kind: failure.kind, error: failure.message };
    if (seen) return log.debug("source still failing", fields);
    // The kubelet authorizes through the API server: refusals during an outage are the outage.
    const outage = failure.source === "kubelet" && !apiAvailable &&
      failure.kind !== "misconfigured";
    if (!isConfigurationFailure(failure) || outage) {
      log.warn("source unavailable this pass", fields);
    } else if (failure.kind === "misconfigured") {
      // The message says what to fix: a kubeconfig field, a proxy variable, kubeletCaFile.
      log.error("source not asked: fix the configuration the error names", fields);
    } else {
      log.error("credentials refused: check the kubeconfig and RBAC", fields);
    }
  }

  /**
   * Before the first write of this process: a write or link a crash interrupted leaves a temp
   * file in a manifest dir, which the kubelet ignores but which holds space (a copy) or an inode.
   * A failure is tried again on the next pass; it stops no write.
   */
  async #sweepOnce() {
    if (this.#swept) return;
    let swept = true;
    for (const dir of [this.#paths.staticPodDir, this.#paths.inactiveDir]) {
      try {
        const files = await sweepTempFiles(dir);
        if (files.length > 0) this.#opts.log.info("leftover temp files removed", { dir, files });
      } catch (e) {
        swept = false;
        this.#opts.log.warn("temp files not swept; tried again next pass", {
          dir,
          error: (e as Error).message,
        });
      }
    }
    this.#swept = swept;
  }

  /**
   * Activation hard-links the inactive manifest, which needs no free space; across two mounts
   * link(2) fails and the manifest is copied, which does. Said once per process, with the fix.
   */
  #warnIfActivationCopies() {
    if (this.#mountsChecked) return;
    this.#mountsChecked = true;
    const mounts = separateMounts(this.#paths.staticPodDir, this.#paths.inactiveDir);
    if (!mounts) return;
    this.#opts.log.warn(
      "the static-pod dir and the inactive dir are on separate mounts: activation copies " +
        "manifests instead of linking them, and fails on a full disk; make them one mount " +
        "(under systemd, one ReadWritePaths= entry that holds both)",
      { staticPodDir: mounts[0], inactiveDir: mounts[1] },
    );
  }

  /** Which parent got which file name because bootkube's was taken: said once per parent. */
  #sayNames(names: ManifestNames) {
    for (const { id, file, reason } of names.clashes) {
      if (this.#saidNames.get(id) === file) continue;
      this.#saidNames.set(id, file);
      this.#opts.log.info("manifest file name taken: the checkpoint gets a name of its own", {
        id,
        file,
        reason,
      });
    }
  }

  #applied(report: Outcome, action: AppliedAction) {
    report.applied.push(action);
    this.#opts.onApplied?.(action);
  }

  async #attempt(report: Outcome, op: string, id: string, work: () => Promise<void>) {
    try {
      await work();
    } catch (e) {
      const error: PassError = { op, id, message: (e as Error).message };
      report.errors.push(error);
      this.#opts.log.error("write failed", { ...error });
    }
  }

  /**
   * Runs `work` for every id, CHECKPOINTS_IN_FLIGHT at a time; what each adds to the report is
   * added in the order of `ids`, so a report does not depend on which write finished first.
   */
  async #forEachCheckpoint(
    report: PassReport,
    ids: readonly string[],
    work: (id: string, outcome: Outcome) => Promise<void>,
  ) {
    const outcomes = await mapConcurrent(ids, CHECKPOINTS_IN_FLIGHT, async (id) => {
      const outcome: Outcome = { applied: [], errors: [] };
      await work(id, outcome);
      return outcome;
    });
    for (const outcome of outcomes) {
      report.applied.push(...outcome.applied);
      report.errors.push(...outcome.errors);
    }
  }

  /** DESIGN §2.5: the sanitized manifest of every tracked parent, then its secrets and configmaps. */
  async #checkpointParents(
    result: PassResult,
    obs: Observation,
    names: ManifestNames,
    report: PassReport,
  ) {
    const { config } = this.#opts;
    const now = obs.input.now;
    const apiAvailable = obs.input.observations.apiAvailable;
    const ids = checkpointedIds(result);
    const blocked = new Map(names.blocked.map((b) => [b.id, b.reason]));
    const manifestOf = (id: string, file: string) =>
      checkpointPaths(this.#paths, id, file).inactiveManifest;
    const refresh: Refresh = { apiUnavailable: false };
    await this.#forEachCheckpoint(report, ids, async (id, out) => {
      const parent = result.parents.get(id)!;
      await this.#attempt(out, "checkpoint", id, async () => {
        const owner = fileOwner(parent);
        if ("error" in owner) throw new Error(`cannot store files for this pod: ${owner.error}`);
        const file = names.names.get(id);
        if (file === undefined) {
          throw new Error(`no file name is free for its manifest (${blocked.get(id)}); left alone`);
        }
        const last = this.#refreshedAt.get(id);
        const refreshDue = last === undefined || now - last >= millis(config.refreshIntervalMs);
        // The manifest is made from the parent alone: the same parent, and a file untouched
        // since it was last checked, mean nothing to do until the refresh falls due.
        const manifest = manifestOf(id, file);
        const parentJson = JSON.stringify(parent);
        if (!refreshDue && this.#checkedManifests.unchanged(manifest, parentJson)) return;
        const sanitized = sanitizeCheckpoint(parent, {
          secretsDir: config.secretsDir,
          configMapsDir: config.configmapsDir,
        });
        this.#warnOnce(id, sanitized.warnings);
        const written = await writeInactiveManifest(this.#paths, sanitized.pod, file);
        this.#checkedManifests.checked(manifest, parentJson);
        if (written === "written") this.#applied(out, { op: "checkpoint", id });
        if (!(refreshDue || written === "written") || !apiAvailable) return;
        const objects = await this.#fetchObjects(
          parent.metadata.namespace,
          sanitized.volumes,
          refresh,
        );
        const files = await writeVolumeFiles(sanitized.volumes, objects.data, owner);
        const { namespace, name } = parent.metadata;
        const stale = await removeStaleVolumeDirs(
          podFileDirs(
            { secretsDir: config.secretsDir, configMapsDir: config.configmapsDir },
            namespace,
            name,
          ),
          sanitized.volumes,
        );
        files.removed += stale.length;
        if (files.written + files.removed > 0) {
          this.#applied(out, {
            op: "files",
            id,
            detail: `${files.written} written, ${files.removed} removed`,
          });
        }
        for (const s of files.skipped) {
          this.#opts.log.warn("volume files kept as they were", { id, ...s });
        }
        // Retry next pass unless everything was fetched and written.
        if (objects.complete && files.skipped.length === 0) this.#refreshedAt.set(id, now);
        else this.#refreshedAt.delete(id);
      });
    });
    for (const memory of [this.#refreshedAt, this.#warned, this.#saidNames]) {
      for (const id of memory.keys()) if (!result.tracked.has(id)) memory.delete(id);
    }
    this.#checkedManifests.retain(
      new Set(ids.flatMap((id) => {
        const file = names.names.get(id);
        return file === undefined ? [] : [manifestOf(id, file)];
      })),
    );
  }

  /**
   * The secrets and configmaps of one checkpoint. Once a GET of this pass finds the API server
   * unavailable, no other is asked this pass: each would wait its own timeout, one after the
   * other, and a hung API server would hold the pass for minutes. What was not fetched is
   * fetched on a later pass, as after any failed fetch.
   */
  async #fetchObjects(
    namespace: string,
    volumes: ReturnType<typeof sanitizeCheckpoint>["volumes"],
    refresh: Refresh,
  ) {
    const api = this.#opts.sources.apiServer;
    const data: ObjectData = new Map();
    let complete = true;
    for (const volume of volumes) {
      for (const source of volume.sources) {
        if (source.kind === "literal") continue;
        const key = objectKey(source.kind, source.name);
        if (data.has(key)) continue;
        if (refresh.apiUnavailable) return { data, complete: false };
        const got = source.kind === "secret"
          ? await api.getSecret(namespace, source.name)
          : await api.getConfigMap(namespace, source.name);
        if (got.ok) data.set(key, got.value);
        else if (got.failure.kind === "not-found") data.set(key, "absent");
        else {
          complete = false;
          if (API_UNAVAILABLE.has(got.failure.kind)) refresh.apiUnavailable = true;
          this.#logFailure(got.failure, true);
        }
      }
    }
    return { data, complete };
  }

  /** What a parent's checkpoint cannot copy, logged when it is first seen or changes. */
  #warnOnce(id: string, warnings: string[]) {
    const said = warnings.join("\n");
    if ((this.#warned.get(id) ?? "") === said) return;
    this.#warned.set(id, said);
    if (warnings.length > 0) {
      this.#opts.log.warn("the checkpoint cannot be an exact copy of its parent", { id, warnings });
    }
  }

  /** Stop, then start, then remove; every tracked checkpoint converges to its action. */
  async #applyActions(
    result: PassResult,
    obs: Observation,
    names: ManifestNames,
    report: PassReport,
  ) {
    const desired = desiredActions(result);
    const ids = (action: Action) => [...desired].filter(([, a]) => a === action).map(([id]) => id);
    const active = obs.manifestFiles.active;
    // Nothing to delete for a stop whose active manifest was not there when this pass read the
    // directory: a steady pass then makes no call per inactive checkpoint.
    const stops = ids("stop").filter((id) =>
      !parseValidId(id) || filesHolding(active, id).length > 0
    );
    await this.#forEachCheckpoint(report, stops, async (id, out) => {
      await this.#attempt(out, "stop", id, async () => {
        if (await deactivateCheckpoint(this.#paths, id) === "removed") {
          this.#applied(out, { op: "stop", id });
        }
      });
    });
    await this.#forEachCheckpoint(report, ids("start"), async (id, out) => {
      await this.#attempt(out, "start", id, async () => {
        const file = names.names.get(id);
        const outcome = file === undefined
          ? "no-inactive-manifest"
          : await activateCheckpoint(this.#paths, id, file);
        if (outcome === "written") this.#applied(out, { op: "start", id });
        if (outcome === "no-inactive-manifest") {
          throw new Error(
            "no inactive manifest to activate (it will be written when the parent is seen)",
          );
        }
        // A copy under its other name would be a second static pod of the same name.
        if (filesHolding(active, id).some((f) => f !== file)) {
          await deactivateCheckpoint(this.#paths, id, file);
        }
      });
    });
    await this.#forEachCheckpoint(report, ids("remove"), async (id, out) => {
      await this.#attempt(out, "remove", id, async () => {
        await removeCheckpoint(this.#paths, id);
        this.#applied(out, { op: "remove", id });
      });
    });
  }

  /** What the agent holds of each checkpoint after this pass: one status record each. */
  #trackStatus(stores: AgentStores, result: PassResult, now: Instant) {
    const changes = new Map(result.changes.map((c) => [c.id, c]));
    for (const [id, state] of result.tracked) {
      const change = changes.get(id);
      const current = stores.peekStatus(id);
      if (!change && recordMatches(current, state)) continue;
      stores.setStatus(id, nextStatusRecord(current, id, state, change, now));
    }
    for (const { id } of stores.status.list()) {
      if (!result.tracked.has(id)) stores.forgetStatus(id);
    }
  }

  /** Keeps the sandboxes that run active checkpoints, and forgets the others. */
  async #trackSandboxes(stores: AgentStores, result: PassResult, running: RunningPod[]) {
    const { config, sources } = this.#opts;
    const runningById = new Map(running.map((pod) => [`${pod.namespace}/${pod.name}`, pod]));
    const wanted = new Set<string>();
    for (const [id, action] of desiredActions(result)) {
      if (action !== "start") continue;
      const copy = runningById.get(`${id.split("/")[0]}/${staticPodName(id, config.nodeName)}`);
      for (const sandboxId of copy?.sandboxIds ?? []) wanted.add(sandboxId);
    }
    const known = new Set(stores.sandboxes.list());
    for (const sandboxId of wanted) {
      if (known.has(sandboxId)) continue;
      const status = await sources.runtime.sandboxStatus(sandboxId);
      if (!status.ok) {
        this.#logFailure(status.failure, true);
        continue;
      }
      const s = status.value;
      stores.setSandbox(sandboxId, {
        version: SANDBOX_CHECKPOINT_VERSION,
        name: s.name,
        namespace: s.namespace,
        netnsPath: s.netnsPath,
        portMappings: s.portMappings,
        interfaces: s.interfaces,
      });
    }
    for (const sandboxId of known) if (!wanted.has(sandboxId)) stores.forgetSandbox(sandboxId);
  }

  /**
   * Writes what this pass (or an earlier one) left unrecorded. A record that cannot be written
   * is an error of the pass and is written again by the next one; they are logged in one line,
   * since a state dir that refuses one write usually refuses them all.
   */
  async #persist(stores: AgentStores, report: PassReport) {
    const outcome = await stores.record();
    for (const sandboxId of outcome.sandboxes.written) {
      const s = stores.sandboxes.get(sandboxId)!;
      this.#applied(report, {
        op: "sandbox-record",
        id: sandboxId,
        detail: `${s.namespace}/${s.name}`,
      });
    }
    for (const sandboxId of outcome.sandboxes.deleted) {
      this.#applied(report, { op: "sandbox-forget", id: sandboxId });
    }
    const unrecorded = [...outcome.status.unrecorded, ...outcome.sandboxes.unrecorded];
    if (unrecorded.length === 0) return;
    for (const u of unrecorded) {
      report.errors.push({ op: recordOp(u), id: u.key, message: u.error });
    }
    const keys = (store: StoreName) =>
      unrecorded.filter((u) => u.store === store).map((u) => u.key);
    this.#opts.log.error("state not recorded; it is written again on the next pass", {
      path: unrecorded[0].path,
      error: unrecorded[0].error,
      checkpoints: keys("status"),
      sandboxes: keys("sandboxes"),
    });
  }
}
