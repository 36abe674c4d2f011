/**
 * One reconcile pass over the real node, phase by phase:
 *
 * - observe (observe.ts): ask the API server, the kubelet and the runtime, and read both manifest
 *   dirs and the previous pass's states, building exactly the snapshot `ckpt-agent plan` reads;
 * - plan: the pure planner (lib/core/pass.ts);
 * - apply: stop (converge.ts), write the checkpoints of the parents seen (checkpoints.ts), then
 *   start and remove (converge.ts), converging every tracked checkpoint to its action;
 * - persist (persist.ts): one status record per tracked checkpoint, and the sandboxes of active
 *   checkpoints;
 * - judge (stalls.ts): which started checkpoints have had no running copy for startTimeout.
 *
 * `plan()` is the first two phases alone and writes nothing; `pass()` is all five. Every byte
 * the agent writes is written by a function these phases call directly.
 */
import { join } from "node:path";
import type { Config } from "../config/types.ts";
import { checkpointIdOf, type Pod, podId } from "../core/pod.ts";
import { type PassResult, runPass } from "../core/pass.ts";
import { type Clock, formatInstant, type Instant, millisToDuration } from "../core/time.ts";
import { totalBytesWritten } from "../disk/atomic_write.ts";
import type { ChangeFeed } from "../sources/changes.ts";
import type { NodeSources } from "../sources/node.ts";
import type { AgentStores } from "../store/agent_stores.ts";
import type { Logger } from "../util/log.ts";
import { checkpointedIds, CheckpointWriter, type WatchedCandidate } from "./checkpoints.ts";
import { converge, desiredActions, withdraw } from "./converge.ts";
import { type CrashLoopPod, CrashLoops } from "./crash_loops.ts";
import { parentReadiness } from "../core/promotion.ts";
import { CRASH_LOOPING_REASON } from "../core/reasons.ts";
import { versionsView } from "../disk/versions.ts";
import type { StatusRecord } from "../store/status_record.ts";
import { ManifestDirChecks } from "./manifest_dirs.ts";
import { ManifestNamer } from "./names.ts";
import {
  type NodeAnswers,
  type Observation,
  Observer,
  sameNodeAnswers,
  trackedFromStore,
  type TrackedStateReader,
} from "./observe.ts";
import { recordAll, trackSandboxes, trackStatus } from "./persist.ts";
import { ProblemLog } from "./problem_log.ts";
import { type AppliedAction, type PassReport, plannedReport } from "./report.ts";
import { SourceFailureLog } from "./source_failures.ts";
import { StalledStartLog, stalledStarts } from "./stalls.ts";
import { runVerb, type VerbRequest, type VerbResult } from "./verbs.ts";
import { Writes } from "./writes.ts";

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

/**
 * What a pass that did nothing started from, when every tracked checkpoint was inactive and its
 * parent running, and the API server either answered from its watch (at rest) or failed: a poll
 * that finds the same is idle (docs/design.md#idle-polls).
 */
interface IdleBasis {
  node: NodeAnswers;
  /** The daemon's counts of the sources' events and of the manifest dirs' changes before it. */
  heard: number;
  dirsQuiet: number;
  /** The pods' watch answered; otherwise the API server failed, and is asked again at `until`. */
  watched: boolean;
  /** When a full pass is due whatever is heard: the first refresh, or the next poll interval. */
  until: Instant;
  report: PassReport;
}

/** A pass once planned: what it saw, what it decided, and its report so far. */
interface Planned {
  started: Instant;
  bytesBefore: number;
  obs: Observation;
  result: PassResult;
  report: PassReport;
}

/**
 * The pods the runtime runs, as the crash-loop judgment reads them: Ready as whichever source
 * has their pod object says (the API server's first; a kubelet read unverified may say what
 * runs), not Ready when none has it (the API server gone and the kubelet refusing the agent).
 */
function crashLoopPods(obs: Observation): CrashLoopPod[] {
  const o = obs.input.observations;
  const objects = new Map<string, Pod>();
  /** The uid each listed parent has now: an older pod of the same name is no parent any more. */
  const current = new Map<string, string>();
  const listed = [
    ...(o.kubeletAvailable ? o.localParents : []),
    ...(o.apiAvailable ? o.apiParents : []),
  ];
  for (const pod of listed) {
    if (pod.metadata.uid === undefined) continue;
    objects.set(pod.metadata.uid, pod);
    current.set(podId(pod), pod.metadata.uid);
  }
  return obs.running.flatMap((r) => {
    const id = `${r.namespace}/${r.name}`;
    if ((current.get(id) ?? r.uid) !== r.uid) return [];
    const object = objects.get(r.uid);
    return [{
      id,
      uid: r.uid,
      restarts: r.restarts,
      containerRunning: r.containerRunning,
      ready: object !== undefined &&
        parentReadiness(object, { running: true, active: false }).ready,
    }];
  });
}

export class Agent {
  readonly #opts: AgentOptions;
  readonly #observer: Observer;
  readonly #failures: SourceFailureLog;
  readonly #writes: Writes;
  readonly #dirs: ManifestDirChecks;
  readonly #names: ManifestNamer;
  readonly #checkpoints: CheckpointWriter;
  readonly #stalls: StalledStartLog;
  readonly #crashLoops = new CrashLoops();
  /** Whether a pass has read which copies a crash loop made active before a restart. */
  #resumed = false;
  /** Manifest files that are not pods, by path: each said once, and when it is gone or fixed. */
  readonly #notPods: ProblemLog;
  /** Checkpoints outside the namespaces that the last pass removed: each is said once. */
  #outside = new Set<string>();
  /** What the last pass started from, if a poll finding the same may be idle. */
  #idle?: IdleBasis;

  constructor(opts: AgentOptions) {
    const { config, sources, clock, log } = opts;
    this.#opts = opts;
    this.#observer = new Observer(config, sources, clock);
    this.#failures = new SourceFailureLog(log, clock);
    this.#writes = new Writes(log, clock, opts.onApplied);
    this.#dirs = new ManifestDirChecks(config, log, clock);
    this.#names = new ManifestNamer(log);
    this.#checkpoints = new CheckpointWriter({
      config,
      apiServer: sources.apiServer,
      log,
      clock,
      writes: this.#writes,
      failures: this.#failures,
    });
    this.#stalls = new StalledStartLog(config, log, clock);
    this.#notPods = new ProblemLog(log, clock, "manifest file removed, or a pod now");
  }

  /** What the sources tell of their own accord, for passes on events; undefined: nothing. */
  get changes(): ChangeFeed | undefined {
    return this.#opts.sources.changes;
  }

  /** The candidate of a parent, as this agent watches it (checkpoints.ts). */
  candidateOf(id: string): WatchedCandidate | undefined {
    return this.#checkpoints.candidateOf(id);
  }

  /** How many candidates wait to be promoted. */
  get candidatesWaiting(): number {
    return this.#checkpoints.candidatesWaiting;
  }

  /**
   * An operator's verb on one checkpoint (verbs.ts), to be run between passes (the daemon's
   * `between`); the next pass looks at that checkpoint afresh.
   */
  async verb(stores: AgentStores, request: VerbRequest): Promise<VerbResult> {
    const { config, clock, log } = this.#opts;
    this.#idle = undefined;
    try {
      return await runVerb(config, stores, request, clock.now(), log);
    } finally {
      this.#checkpoints.forget(request.id);
    }
  }

  /** The file name of a checkpoint's manifests; undefined before a pass has placed it. */
  manifestFileOf(id: string): string | undefined {
    return this.#names.fileOf(id);
  }

  /**
   * Asks every source at once; a failed source is flagged in the snapshot, never faked.
   * `dirsQuiet`: see Observer.observe.
   */
  observe(readTracked: TrackedStateReader, dirsQuiet?: number): Promise<Observation> {
    return this.#observer.observe(readTracked, dirsQuiet);
  }

  /** What a pass would do now, writing nothing (`--once --dry-run`): observe and plan. */
  async plan(readTracked: TrackedStateReader): Promise<PassReport> {
    return this.#finish(await this.#observeAndPlan(readTracked));
  }

  /**
   * A full pass, from and into what the agent holds in `stores`. `dirsQuiet`: the manifest dirs'
   * watch's `quiet` (lib/daemon/dir_watch.ts), if they are watched. `heard`: how many events the
   * sources' change feed told so far, if the daemon counts them. `poll`: the pass runs for the
   * poll alone, and may be idle (see #idlePass). `cut`: aborted when what the pass planned from
   * is no longer so (the API server lost, or back): the pass then starts no further checkpoint
   * write nor record, and leaves them to the next pass, which the daemon runs at once.
   * Stops, starts and removes are never cut: they are the plan.
   */
  async pass(
    stores: AgentStores,
    opts: { dirsQuiet?: number; heard?: number; poll?: boolean; cut?: AbortSignal } = {},
  ): Promise<PassReport> {
    const idle = opts.poll ? await this.#idlePass(opts) : {};
    if (idle.report) return idle.report;
    this.#idle = undefined;
    const planned = await this.#observeAndPlan(
      trackedFromStore(stores.status),
      opts.dirsQuiet,
      stores.status.peekAll(),
      idle.asked,
    );
    // Said by the pass that makes them, never by a plan (`--dry-run`), which changes nothing.
    for (const change of planned.report.changes) this.#opts.log.info("state change", change);
    this.#sayOutside(planned.result);
    const checkpoints = await this.#apply(planned, opts.cut);
    const records = await this.#persist(stores, planned, opts.cut);
    this.#writes.passEnded(checkpoints + records > 0);
    this.#judgeStarts(stores, planned);
    if (checkpoints + records > 0) {
      planned.report.leftToNextPass = { checkpoints, records };
      planned.report.complete = false;
      this.#opts.log.info("pass cut short; the next pass does what it left", {
        checkpoints,
        records,
      });
    }
    const report = this.#finish(planned);
    this.#idle = this.#idleBasis(planned, opts);
    return report;
  }

  /**
   * A poll that finds what the last pass started from does nothing: the same kubelet and runtime
   * answers (by identity: the same bytes), no event of the sources nor of the manifest dirs since,
   * the pods' watch still answering (or the API server still failing), and neither a refresh nor,
   * with the API server failing, the poll interval due. Such a pass would plan the same, write
   * nothing, and leave no deadline (every checkpoint inactive, no candidate waiting): its report
   * is the last one's, `idle`. Otherwise the answers asked are the full pass's.
   */
  async #idlePass(
    opts: { dirsQuiet?: number; heard?: number },
  ): Promise<{ report?: PassReport; asked?: NodeAnswers }> {
    const { clock, config, sources } = this.#opts;
    const basis = this.#idle;
    const started = clock.now();
    if (
      basis === undefined || opts.heard !== basis.heard || opts.dirsQuiet !== basis.dirsQuiet ||
      started >= basis.until ||
      (basis.watched && sources.apiServer.watchedNodePods?.(config.nodeName) === undefined)
    ) {
      return {};
    }
    const asked = await this.#observer.askNode();
    if (!sameNodeAnswers(asked, basis.node)) return { asked };
    return {
      report: {
        ...basis.report,
        startedAt: formatInstant(started),
        durationMs: Number(clock.now() - started) / 1e6,
        bytesWritten: 0,
        idle: true,
      },
    };
  }

  /** What a pass that did nothing leaves for the polls after it; undefined: they are full. */
  #idleBasis(
    { obs, result, report }: Planned,
    opts: { dirsQuiet?: number; heard?: number },
  ): IdleBasis | undefined {
    const { dirsQuiet, heard } = opts;
    const o = obs.input.observations;
    const didNothing = report.errors.length === 0 && report.applied.length === 0 &&
      report.changes.length === 0 && report.stalledStarts.length === 0 &&
      report.leftToNextPass === undefined && Object.keys(report.crashLooping).length === 0 &&
      this.#checkpoints.candidatesWaiting === 0 &&
      report.failures.every((f) => f.source !== "runtime") &&
      [...result.tracked.values()].every((state) => state.name === "inactive");
    if (dirsQuiet === undefined || heard === undefined || !didNothing) return undefined;
    // A list that answered says nothing of the changes after it: only a watch tells them.
    if (o.apiAvailable && !obs.apiWatched) return undefined;
    const until = o.apiAvailable
      ? this.#checkpoints.refreshDueAt(checkpointedIds(result), obs.input.now)
      : obs.input.now + millisToDuration(this.#opts.config.pollIntervalMs);
    if (until === undefined) return undefined;
    return { node: obs.node, heard, dirsQuiet, watched: o.apiAvailable, until, report };
  }

  /**
   * `records`: the status records the pass starts from, when it will write; on the first pass
   * they say which copies a crash loop made active before a restart (#resumedCrashLoops).
   */
  async #observeAndPlan(
    readTracked: TrackedStateReader,
    dirsQuiet?: number,
    records?: readonly StatusRecord[],
    asked?: NodeAnswers,
  ): Promise<Planned> {
    const { clock } = this.#opts;
    const started = clock.now();
    const bytesBefore = totalBytesWritten();
    const observed = await this.#observer.observe(readTracked, dirsQuiet, asked);
    let resumed: Map<string, number> | undefined;
    if (records && !this.#resumed) {
      resumed = await this.#resumedCrashLoops(observed, records);
      this.#resumed = true;
    }
    const obs = this.#judged(observed, resumed);
    this.#failures.newPass(obs.failures, obs.input.observations.apiAvailable);
    this.#notPods.settle(new Set(obs.manifestProblems.map((p) => p.file)));
    for (const { file, problem } of obs.manifestProblems) {
      this.#notPods.there(file, {
        level: "warn",
        msg: "manifest is not a pod; left alone",
        about: { file },
        fields: { problem },
        what: problem,
      });
    }
    const result = runPass(obs.input);
    const report = plannedReport(
      started,
      obs.failures,
      result,
      obs.input.observations.crashLooping,
    );
    return { started, bytesBefore, obs, result, report };
  }

  /**
   * What the node shows, with what this agent judged of it: the parents crash-looping on an
   * unproven spec (crash_loops.ts) and the checkpoints a successor superseded (checkpoints.ts).
   */
  #judged(obs: Observation, judgedBefore?: ReadonlyMap<string, number>): Observation {
    const o = obs.input.observations;
    const crashLooping = this.#crashLoops.judge({
      now: obs.input.now,
      crashLoopAfterMs: this.#opts.config.crashLoopAfterMs,
      pods: o.runtimeAvailable ? crashLoopPods(obs) : undefined,
      keptWhileUnproven: (id) => this.#checkpoints.keptWhileUnproven(id),
      ...(judgedBefore ? { judgedBefore } : {}),
    });
    const superseded = this.#checkpoints.superseded;
    const observations = {
      ...o,
      ...(Object.keys(crashLooping).length > 0 ? { crashLooping } : {}),
      ...(superseded.length > 0 ? { superseded } : {}),
    };
    return { ...obs, input: { ...obs.input, observations } };
  }

  /**
   * The checkpoints active because their parent crash-looped when the agent stopped (their
   * status record's reason), with the version each keeps while a candidate still waits: read
   * from disk, since this process has not watched their candidates yet.
   */
  async #resumedCrashLoops(
    obs: Observation,
    records: readonly StatusRecord[],
  ): Promise<Map<string, number>> {
    const { config } = this.#opts;
    const resumed = new Map<string, number>();
    for (const record of records) {
      if (record.reason !== CRASH_LOOPING_REASON || record.state !== "active") continue;
      const file = [...obs.manifestFiles.inactive].find(([, id]) => id === record.id)?.[0];
      if (file === undefined) continue;
      const view = await versionsView(config, record.id, file);
      if (view.candidate && view.kept !== undefined) resumed.set(record.id, view.kept);
    }
    return resumed;
  }

  /**
   * A checkpoint outside the namespaces parents may come from (left by an earlier version or
   * configuration) is said at warn once, with the setting that would keep it.
   */
  #sayOutside(result: PassResult) {
    const outside = new Set(
      result.changes.filter((c) => c.cause === "outside-namespaces").map((c) => c.id),
    );
    for (const id of outside) {
      if (this.#outside.has(id)) continue;
      const namespace = id.slice(0, id.indexOf("/"));
      this.#opts.log.warn(
        "checkpoint outside the namespaces parents may come from: withdrawn and removed",
        { id, keep: `add ${namespace} to the namespace setting (--namespace) to keep it` },
      );
    }
    this.#outside = outside;
  }

  /** Returns how many checkpoint writes `cut` left to the next pass. */
  async #apply({ obs, result, report }: Planned, cut?: AbortSignal): Promise<number> {
    await this.#dirs.beforeWriting();
    // Before any write: two checkpoints written at once must never target one file.
    const names = this.#names.assign(result, obs.manifestFiles);
    await withdraw(this.#opts.config, this.#writes, result, obs, report);
    const left = await this.#checkpoints.write(result, obs, names, report, cut);
    await converge(
      this.#opts.config,
      this.#writes,
      result,
      obs,
      names,
      report,
      (id) => this.#checkpoints.refused(id),
    );
    return left;
  }

  /** Returns how many records `cut` left to the next pass. */
  async #persist(
    stores: AgentStores,
    { obs, result, report }: Planned,
    cut?: AbortSignal,
  ): Promise<number> {
    const { config, sources } = this.#opts;
    trackStatus(stores, result, obs.input.now);
    if (obs.input.observations.runtimeAvailable) {
      await trackSandboxes(stores, result, obs.running, {
        nodeName: config.nodeName,
        runtime: sources.runtime,
        failures: this.#failures,
      });
    }
    return await recordAll(stores, report, this.#writes, cut);
  }

  #judgeStarts(stores: AgentStores, { obs, result, report }: Planned) {
    const { config } = this.#opts;
    const runtimeAnswered = obs.input.observations.runtimeAvailable;
    const started = new Set(
      [...desiredActions(result)].filter(([, action]) => action === "start").map(([id]) => id),
    );
    report.stalledStarts = stalledStarts({
      records: stores.status.peekAll(),
      started,
      running: runtimeAnswered ? obs.running : undefined,
      nodeName: config.nodeName,
      now: obs.input.now,
      startTimeoutMs: config.startTimeoutMs,
    });
    const { activeCheckpoints, inactiveCheckpoints } = obs.input.observations;
    this.#stalls.judged(runtimeAnswered ? report.stalledStarts : undefined, (id) => {
      const file = this.#names.fileOf(id);
      return {
        ...(file !== undefined ? { file: join(config.staticPodDir, file) } : {}),
        pod: [...activeCheckpoints, ...inactiveCheckpoints].find((pod) =>
          checkpointIdOf(pod) === id
        ),
      };
    });
  }

  #finish({ started, bytesBefore, report }: Planned): PassReport {
    if (report.errors.length > 0) report.complete = false;
    report.bytesWritten = totalBytesWritten() - bytesBefore;
    report.durationMs = Number(this.#opts.clock.now() - started) / 1e6;
    return report;
  }
}
