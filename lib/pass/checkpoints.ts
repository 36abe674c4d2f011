/**
 * Apply, first part: the checkpoint of every tracked parent seen, its sanitized manifest in the
 * inactive dir and then its secrets and configmaps in their stored files. What this process has
 * learnt about each parent (when its files were refreshed, what was said about it, which
 * manifests are known to be up to date) lives here, so that a steady pass writes nothing.
 */
import type { Config } from "../config/types.ts";
import {
  checkpointPaths,
  type CheckpointTrees,
  type StoredAccess,
  storedAccess,
  versionFileDirs,
  versionsDir,
} from "../core/checkpoint_layout.ts";
import { parseValidId } from "../core/ids.ts";
import { nestsDeeperThan } from "../core/json.ts";
import type { ManifestNames } from "../core/manifest_names.ts";
import type { PassResult } from "../core/pass.ts";
import { type Pod, podId } from "../core/pod.ts";
import { findPredecessor, inheritedParent, originParent } from "../core/lineage.ts";
import {
  type Candidate,
  decidePromotion,
  parentReadiness,
  readinessGapMs,
} from "../core/promotion.ts";
import {
  CheckpointRefused,
  type CheckpointSite,
  sanitizeCheckpoint,
  type SanitizedCheckpoint,
} from "../core/sanitize.ts";
import { actionOf } from "../core/state.ts";
import {
  type Clock,
  formatInstant,
  type Instant,
  millisToDuration,
  parseInstant,
} from "../core/time.ts";
import { agentUid } from "../disk/dirs.ts";
import { renderManifest, writeInactiveManifest } from "../disk/manifests.ts";
import {
  manifestTexts,
  nextVersion,
  pruneVersions,
  readKept,
  readOrigin,
  readStoredVersions,
  removeCandidate,
  type StoredCandidate,
  type StoredOrigin,
  type StoredVersions,
  writeCandidate,
  writeOrigin,
  writeVersion,
} from "../disk/versions.ts";
import {
  copyVolumeFiles,
  type ObjectData,
  objectKey,
  removeStaleVolumeDirs,
  writeVolumeFiles,
} from "../disk/pod_files.ts";
import { contentDigest, TreeStamp, VerifiedFiles } from "../disk/verified_files.ts";
import type { ApiServerClient } from "../sources/apiserver.ts";
import type { ObjectRef } from "../sources/object_watches.ts";
import type { FailureKind } from "../sources/types.ts";
import { isFrozenWhole } from "../util/frozen.ts";
import type { Logger } from "../util/log.ts";
import { type Lineage, sameDirIn, versionsInPlace } from "./lineage.ts";
import type { Observation } from "./observe.ts";
import { ProblemLog } from "./problem_log.ts";
import type { PassReport } from "./report.ts";
import type { SourceFailureLog } from "./source_failures.ts";
import type { Outcome, Writes } from "./writes.ts";

/**
 * How deep a parent's JSON may nest for a checkpoint to be made of it. A pod nests about 15
 * levels. Copying one takes structuredClone and JSON.stringify, which recurse and fail a few
 * thousand levels down (structuredClone from about 3,000 in Deno 2.9.6, less on a deeper call
 * stack): a parent past this bound is refused whole, before anything recursive sees it
 * (docs/design.md#one-object).
 */
const MAX_NESTING = 200;

/**
 * Why no checkpoint can be made of `parent` at all, if none can: it nests too deep to be copied,
 * its containers' users cannot all read one file (storedAccess), or it names a volume, an object
 * or an item path no path may be built from (CheckpointRefused). What a parent is, not what a
 * pass found: the same parent is refused the same way on every pass.
 */
function refusal(parent: Pod, site: CheckpointSite): string | undefined {
  if (nestsDeeperThan(parent, MAX_NESTING)) {
    const field = Object.keys(parent).find((key) =>
      nestsDeeperThan((parent as Record<string, unknown>)[key], MAX_NESTING - 1)
    );
    return `its ${field} nests deeper than ${MAX_NESTING} levels: no copy of it can be made`;
  }
  const access = storedAccess(parent, agentUid());
  if ("error" in access) return `cannot store files for this pod: ${access.error}`;
  try {
    sanitizeCheckpoint(parent, site);
  } catch (e) {
    if (e instanceof CheckpointRefused) return e.message;
    throw e;
  }
  return undefined;
}

/** The parents whose checkpoints this pass writes. */
export function checkpointedIds(result: PassResult): string[] {
  return [...result.parents.keys()].filter((id) => result.tracked.has(id) && parseValidId(id));
}

/** A candidate as a versions directory keeps it, for a process that has not watched it. */
function fromStored(stored: StoredCandidate | undefined): Candidate | undefined {
  const seenAt = stored && parseInstant(stored.seenAt);
  if (!stored || seenAt === undefined) return undefined;
  const readySince = stored.readySince === undefined ? undefined : parseInstant(stored.readySince);
  const lastReadyAt = stored.lastReadyAt === undefined
    ? undefined
    : parseInstant(stored.lastReadyAt);
  return {
    manifest: renderManifest(stored.manifest),
    version: stored.version,
    seenAt,
    ...(readySince !== undefined && lastReadyAt !== undefined ? { readySince, lastReadyAt } : {}),
  };
}

/** A candidate as its versions directory keeps it. */
function toStored(candidate: Candidate): StoredCandidate {
  const { readySince, lastReadyAt } = candidate;
  return {
    version: candidate.version,
    seenAt: formatInstant(candidate.seenAt),
    ...(readySince !== undefined ? { readySince: formatInstant(readySince) } : {}),
    ...(lastReadyAt !== undefined ? { lastReadyAt: formatInstant(lastReadyAt) } : {}),
    manifest: JSON.parse(candidate.manifest),
  };
}

/**
 * The number a first version (made from `parent`) gets: the newest version stored when it is
 * this very spec (a first checkpoint whose inactive manifest could not be written, on a full
 * disk, or an inheritance cut short, is tried again as the same version, not as a new one each
 * pass), else the next.
 */
function firstVersion(parent: Pod, dirs: Config, stored: StoredVersions): number {
  const newest = stored.versions.at(-1);
  if (
    newest && renderManifest(sanitizeCheckpoint(parent, dirs, newest.version).pod) === newest.text
  ) {
    return newest.version;
  }
  return nextVersion(stored, undefined);
}

/** A version's origin: the parent it is made from, now, and any predecessor's version. */
function originNow(parent: Pod, now: Instant, inheritedFrom?: StoredOrigin["inheritedFrom"]) {
  return {
    madeAt: formatInstant(now),
    ...(inheritedFrom ? { inheritedFrom } : {}),
    parent: originParent(parent),
  };
}

/** The secrets and configmaps a checkpoint's volumes take their files from. */
function objectRefs(
  namespace: string,
  volumes: ReturnType<typeof sanitizeCheckpoint>["volumes"],
): ObjectRef[] {
  return volumes.flatMap((volume) =>
    volume.sources.flatMap((source) =>
      source.kind === "literal" ? [] : [{ kind: source.kind, namespace, name: source.name }]
    )
  );
}

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

export interface CheckpointWriterOptions {
  config: Config;
  apiServer: ApiServerClient;
  log: Logger;
  clock: Clock;
  writes: Writes;
  failures: SourceFailureLog;
}

/** One parent's checkpoint, as one pass works on it. */
interface Work {
  id: string;
  parent: Pod;
  /** The digest of the parent as JSON. */
  parentKey: string;
  /** Its manifest's file name (assignManifestNames). */
  file: string;
  access: StoredAccess;
  now: Instant;
  refreshDue: boolean;
  apiAvailable: boolean;
  refresh: Refresh;
  out: Outcome;
  /** Whose heir it might be: the checkpoints tracked this pass. */
  lineage: Lineage;
}

/** What the first look at a checkpoint found it needs. */
interface Look {
  refreshDue: boolean;
  /** The digest of the parent as JSON. */
  parentKey: string;
}

/** A candidate as this process watches it, with why it waits. */
export interface WatchedCandidate extends Candidate {
  why: string;
  /** The version the checkpoint keeps meanwhile. */
  kept: number;
}

export class CheckpointWriter {
  readonly #opts: CheckpointWriterOptions;
  readonly #paths: CheckpointTrees;
  /** Per parent: when its secrets and configmaps were last stored. */
  readonly #refreshedAt = new Map<string, Instant>();
  /** Per parent: the sanitizer's warnings last logged, so that each is said once. */
  readonly #warned = new Map<string, string>();
  /** Parents of which no checkpoint can be made, by id: why, said once (refusal). */
  readonly #refused: ProblemLog;
  /** Volumes whose files are kept as they were, by `id volume`: why, said once. */
  readonly #volumesKept: ProblemLog;
  /** Parents frozen whole (lib/util/frozen.ts) of which no checkpoint can be made, and why. */
  readonly #refusals = new WeakMap<Pod, string>();
  /** Inactive manifests known to be what their parent (the key) makes of them. */
  readonly #checkedManifests = new VerifiedFiles();
  /**
   * Per parent: its stored secret and configmap files known to hold what they were last written
   * or found with, so that the refresh reads back only those someone may have touched since.
   */
  readonly #storedFiles = new Map<string, VerifiedFiles>();
  /**
   * Per parent: the new spec waiting to be promoted. Since when it has been Ready is known to
   * this process only: after a restart the wait starts again, which only delays a promotion.
   */
  readonly #candidates = new Map<string, WatchedCandidate>();
  /** Predecessors whose kept version a successor inherited: see `superseded`. */
  readonly #superseded = new Set<string>();
  /** Per parent: the objects it needs, and their versions when its files were last stored. */
  readonly #objects = new Map<string, { refs: ObjectRef[]; versions?: string }>();
  /**
   * Per parent whose last look was a refresh that found its kept version and every file in
   * place: what that refresh was made from (the parent, its objects' versions as their watches
   * knew them) and its versions and file directories as lstat showed them then.
   */
  readonly #inPlace = new Map<string, { inputs: string; trees: TreeStamp }>();
  /** Parents frozen whole (lib/util/frozen.ts), and the digest of each as JSON. */
  readonly #parentKeys = new WeakMap<Pod, string>();
  /** Per parent: its inactive manifest's file name and path. */
  readonly #manifests = new Map<string, { file: string; path: string }>();
  /** The objects watchObjects was last told of, as each parent's list. */
  #watched: readonly ObjectRef[][] = [];

  constructor(opts: CheckpointWriterOptions) {
    this.#opts = opts;
    this.#paths = opts.config;
    this.#refused = new ProblemLog(
      opts.log,
      opts.clock,
      "a checkpoint of this parent can be made again",
    );
    this.#volumesKept = new ProblemLog(opts.log, opts.clock, "volume files stored again");
  }

  /** The candidate of a parent, as this process watches it. */
  candidateOf(id: string): WatchedCandidate | undefined {
    return this.#candidates.get(id);
  }

  /**
   * No checkpoint of this parent can be made (its pod as a whole is refused, and the log said
   * why): whatever it lacks on disk is said, not an error of every pass.
   */
  refused(id: string): boolean {
    return this.#refused.has(id);
  }

  /**
   * The version a parent's checkpoint keeps while its unproven spec waits to be promoted;
   * undefined when none waits (lib/pass/crash_loops.ts).
   */
  keptWhileUnproven(id: string): number | undefined {
    return this.#candidates.get(id)?.kept;
  }

  /**
   * The checkpoints whose kept version a successor inherited in this process
   * (docs/design.md#lineage), while they are tracked: the planner's `superseded`.
   */
  get superseded(): string[] {
    return [...this.#superseded];
  }

  /** How many candidates wait. */
  get candidatesWaiting(): number {
    return this.#candidates.size;
  }

  /**
   * The first instant at which the refresh of one of `ids` falls due, and at most a refresh
   * interval after `now`; undefined when one is due now (never made, or refused: such a parent
   * is looked at again on every pass).
   */
  refreshDueAt(ids: Iterable<string>, now: Instant): Instant | undefined {
    let first = now + millisToDuration(this.#opts.config.refreshIntervalMs);
    for (const id of ids) {
      const at = this.#refreshedAt.get(id);
      if (at === undefined) return undefined;
      const due = at + millisToDuration(this.#opts.config.refreshIntervalMs);
      if (due < first) first = due;
    }
    return first;
  }

  /**
   * An operator's verb changed a checkpoint's versions (lib/pass/verbs.ts): its manifest is
   * checked again and its candidate watched afresh on the next pass.
   */
  forget(id: string) {
    this.#candidates.delete(id);
    this.#refreshedAt.delete(id);
    this.#inPlace.delete(id);
  }

  /** The sanitized manifest of every tracked parent, then its secrets and configmaps. */
  /**
   * Once `cut` is aborted, no further checkpoint is worked on; returns how many were left to the
   * next pass, which looks at them afresh.
   */
  async write(
    result: PassResult,
    obs: Observation,
    names: ManifestNames,
    report: PassReport,
    cut?: AbortSignal,
  ): Promise<number> {
    const { writes } = this.#opts;
    const now = obs.input.now;
    const apiAvailable = obs.input.observations.apiAvailable;
    const ids = checkpointedIds(result);
    // Most passes find most checkpoints as they were left: those are told apart first, without
    // a turn of the event loop each, and only the others are worked on.
    const looks = new Map<string, Look>();
    for (const id of ids) {
      const parent = result.parents.get(id)!;
      if (this.#refuse(id, parent)) continue;
      const look = this.#look(id, parent, names.names.get(id), now, obs);
      if (look !== "as left") looks.set(id, look);
    }
    const blocked = new Map(names.blocked.map((b) => [b.id, b.reason]));
    const refresh: Refresh = { apiUnavailable: false };
    const running = new Set(looks.size === 0 ? [] : obs.running.map((r) => r.uid));
    const lineage: Lineage = {
      tracked: looks.size === 0 ? [] : [...result.tracked.keys()],
      parents: result.parents,
      names,
    };
    const left = await writes.forEachCheckpoint(report, [...looks.keys()], async (id, out) => {
      const parent = result.parents.get(id)!;
      await writes.attempt(out, "checkpoint", id, async () => {
        // Refused before this (refusal): a pod its users cannot all read is never here.
        const access = storedAccess(parent, agentUid()) as StoredAccess;
        const file = names.names.get(id);
        if (file === undefined) {
          throw new Error(`no file name is free for its manifest (${blocked.get(id)}); left alone`);
        }
        const { refreshDue, parentKey } = looks.get(id)!;
        const manifest = this.#manifestOf(id, file);
        this.#inPlace.delete(id);
        const work: Work = {
          id,
          parent,
          parentKey,
          file,
          access,
          now,
          refreshDue,
          apiAvailable,
          refresh,
          out,
          lineage,
        };
        const ready = parentReadiness(parent, {
          running: parent.metadata.uid !== undefined && running.has(parent.metadata.uid),
          active: actionOf(result.tracked.get(id)!) === "start",
        });
        if (await this.#checkpoint(work, manifest, ready.ready)) {
          this.#checkedManifests.checked(manifest, { digest: parentKey });
        }
      });
    }, cut);
    // A parent only a kubelet read unverified lists is not worked on (docs/design.md#trust), but
    // it is not gone either; nor is one no source could list (the API server gone, the kubelet
    // refusing the agent, or a source the agent's own permissions kept it from asking): a failed
    // source means no new parents, never parents gone. Its candidate stays, unproven
    // (lib/pass/crash_loops.ts), and its wait starts over once it is worked on again, the passes
    // between too far apart.
    const { localParents, kubeletAvailable, ownFailure } = obs.input.observations;
    const listed = new Set(localParents.map(podId));
    const unseen = ownFailure || (!apiAvailable && !kubeletAvailable);
    for (const id of this.#candidates.keys()) {
      if (ids.includes(id) || listed.has(id) || unseen) continue;
      // Gone, or not seen this pass: its readiness is no longer continuous. The kept version
      // stays whatever happens to the parent; the planner decides about that.
      await writes.attempt(report, "checkpoint", id, () => this.#discard(id, "parent not seen"));
    }
    this.#refused.retain((id) => result.tracked.has(id));
    this.#volumesKept.retain((key) => result.tracked.has(key.slice(0, key.indexOf(" "))));
    for (
      const memory of [
        this.#refreshedAt,
        this.#warned,
        this.#objects,
        this.#storedFiles,
        this.#inPlace,
        this.#manifests,
      ]
    ) {
      for (const id of memory.keys()) if (!result.tracked.has(id)) memory.delete(id);
    }
    for (const id of this.#superseded) if (!result.tracked.has(id)) this.#superseded.delete(id);
    // The objects the checkpoints need are watched, and no others; told again only when that
    // changed.
    const refs = [...this.#objects.values()].map((o) => o.refs);
    if (refs.length !== this.#watched.length || refs.some((r, i) => r !== this.#watched[i])) {
      this.#opts.apiServer.watchObjects?.(refs.flat());
      this.#watched = refs;
    }
    this.#checkedManifests.retain(
      new Set(ids.flatMap((id) => {
        const file = names.names.get(id);
        return file === undefined ? [] : [this.#manifestOf(id, file)];
      })),
    );
    return left;
  }

  /**
   * A first look at one parent's checkpoint, from what this process remembers and a stat:
   * "as left" when this pass has nothing to do for it. The manifest is made from the parent
   * alone: the same parent, and a file untouched since it was last checked, mean nothing to do
   * until the refresh falls due. A candidate also waits on time, so it is looked at on every
   * pass.
   */
  #look(
    id: string,
    parent: Pod,
    file: string | undefined,
    now: Instant,
    obs: Observation,
  ): Look | "as left" {
    const last = this.#refreshedAt.get(id);
    const refreshDue = last === undefined ||
      now - last >= millisToDuration(this.#opts.config.refreshIntervalMs) ||
      this.#objectsChanged(id);
    const parentKey = this.#parentKey(parent);
    const manifest = file === undefined ? undefined : this.#manifestOf(id, file);
    // No stat when the inactive dir is watched and nothing there changed since the last pass.
    const checked = manifest !== undefined &&
      (obs.manifestDirsQuiet
        ? this.#checkedManifests.held(manifest, { digest: parentKey })
        : this.#checkedManifests.unchanged(manifest, { digest: parentKey }));
    if (checked && !this.#candidates.has(id)) {
      if (!refreshDue) return "as left";
      // A refresh from the same inputs over the same trees would find everything in place.
      if (obs.input.observations.apiAvailable && this.#stillInPlace(id, parentKey)) {
        this.#refreshedAt.set(id, now);
        return "as left";
      }
    }
    return { refreshDue, parentKey };
  }

  /** The digest of `parent` as JSON, kept by identity for a parent that cannot change. */
  #parentKey(parent: Pod): string {
    const known = this.#parentKeys.get(parent);
    if (known !== undefined) return known;
    const key = contentDigest(JSON.stringify(parent));
    if (isFrozenWhole(parent)) this.#parentKeys.set(parent, key);
    return key;
  }

  /** The path of a checkpoint's inactive manifest, under `file`. */
  #manifestOf(id: string, file: string): string {
    const known = this.#manifests.get(id);
    if (known?.file === file) return known.path;
    const path = checkpointPaths(this.#paths, id, file).inactiveManifest;
    this.#manifests.set(id, { file, path });
    return path;
  }

  /**
   * Brings one parent's checkpoint to what promotion decides (lib/core/promotion.ts); true
   * when its inactive manifest is then what the parent makes of it.
   */
  async #checkpoint(work: Work, manifest: string, ready: boolean): Promise<boolean> {
    const { config } = this.#opts;
    const { id, parent } = work;
    let onDisk = await readKept(this.#paths, id, manifest);
    if (onDisk.kept === undefined && await this.#inherit(work, onDisk.stored)) {
      onDisk = await readKept(this.#paths, id, manifest);
    }
    const stored = onDisk.stored;
    const first = onDisk.kept === undefined;
    const keptVersion = onDisk.kept ?? firstVersion(parent, config, stored);
    const asKept = sanitizeCheckpoint(parent, config, keptVersion);
    this.#warnOnce(id, asKept.warnings);
    const version = nextVersion(stored, onDisk.kept);
    const asNext = first || renderManifest(asKept.pod) === onDisk.text
      ? undefined
      : sanitizeCheckpoint(parent, config, version);
    const decision = decidePromotion({
      now: work.now,
      promoteAfterMs: config.promoteAfterMs,
      maxGapMs: readinessGapMs(config.pollIntervalMs),
      first,
      runsKept: asNext === undefined,
      manifest: asNext ? renderManifest(asNext.pod) : "",
      version,
      candidate: this.#candidates.get(id) ?? fromStored(stored.candidate),
      ready,
      pinned: stored.pinned !== undefined,
    });
    switch (decision.kind) {
      case "first": {
        // Nothing better to keep: the first version is taken as the parent has it, and its
        // files follow (they may be fetched on a later pass).
        const text = renderManifest(asKept.pod);
        await writeVersion(this.#paths, id, keptVersion, {
          origin: originNow(parent, work.now),
          manifest: text,
        });
        if (await writeInactiveManifest(this.#paths, asKept.pod, work.file) === "written") {
          this.#opts.writes.applied(work.out, { op: "checkpoint", id });
        }
        await this.#refreshFiles(work, asKept, keptVersion, true);
        return true;
      }
      case "kept":
        if (this.#candidates.has(id) || stored.candidate) {
          await this.#discard(id, "the parent runs the kept version again");
        }
        if (work.refreshDue) {
          // What the kept version was made from, once: a version made before origins were
          // kept learns it from the parent that runs it, so that it can be a predecessor.
          if (!await readOrigin(this.#paths, id, keptVersion)) {
            await writeOrigin(this.#paths, id, keptVersion, originNow(parent, work.now));
          }
          await this.#refreshFiles(work, asKept, keptVersion, false);
          this.#stampInPlace(work, keptVersion);
        }
        return true;
      case "wait":
        await this.#watch(
          id,
          { ...decision.candidate, kept: keptVersion },
          decision.why,
          stored.candidate,
        );
        return false;
      case "promote":
        return await this.#promote(work, asNext!, decision.candidate, keptVersion);
    }
  }

  /**
   * The kept version's files, fetched again: into its own directories, never another
   * version's. `written`: its manifest was just written, so they are due whatever the time.
   */
  async #refreshFiles(
    work: Work,
    sanitized: SanitizedCheckpoint,
    version: number,
    written: boolean,
  ): Promise<void> {
    if (!(work.refreshDue || written) || !work.apiAvailable) return;
    const refs = objectRefs(work.parent.metadata.namespace, sanitized.volumes);
    const versions = this.#versionsOf(refs);
    const complete = await this.#storeFiles(work, sanitized, version);
    // Retry next pass unless everything was fetched and written.
    if (complete) this.#refreshedAt.set(work.id, work.now);
    else this.#refreshedAt.delete(work.id);
    this.#objects.set(work.id, { refs, ...(complete ? { versions } : {}) });
  }

  /** Fetches and writes one version's files; true when every one was fetched and stored. */
  async #storeFiles(work: Work, sanitized: SanitizedCheckpoint, version: number) {
    const { config, writes } = this.#opts;
    const { id, parent } = work;
    const objects = await this.#fetchObjects(
      parent.metadata.namespace,
      sanitized.volumes,
      work.refresh,
    );
    let verified = this.#storedFiles.get(id);
    if (!verified) this.#storedFiles.set(id, verified = new VerifiedFiles());
    const files = await writeVolumeFiles(sanitized.volumes, objects.data, work.access, {
      verified,
      maxBytes: config.checkpointMaxBytes,
    });
    const stale = await removeStaleVolumeDirs(config, parent.metadata, version, sanitized.volumes);
    files.removed += stale.length;
    if (files.written + files.removed > 0) {
      writes.applied(work.out, {
        op: "files",
        id,
        detail: `${files.written} written, ${files.removed} removed`,
      });
    }
    // Tried again every pass while one is skipped: said when it starts and when it ends.
    const kept = new Set(files.skipped.map((s) => `${id} ${s.volume}`));
    this.#volumesKept.settle(kept, (key) => key.startsWith(`${id} `));
    for (const s of files.skipped) {
      this.#volumesKept.there(`${id} ${s.volume}`, {
        level: "warn",
        msg: "volume files kept as they were",
        about: { id, volume: s.volume },
        fields: { reason: s.reason },
        what: s.reason,
      });
    }
    return objects.complete && files.skipped.length === 0;
  }

  /** A candidate waits; said when it first appears and whenever why it waits changes. */
  async #watch(
    id: string,
    candidate: Candidate & { kept: number },
    why: string,
    stored?: StoredCandidate,
  ) {
    const earlier = this.#candidates.get(id);
    this.#candidates.set(id, { ...candidate, why });
    // Kept on disk with its wait, so that a restarted agent (or `--once` run every poll
    // interval) goes on with it; an unchanged candidate is not rewritten.
    const next = toStored(candidate);
    if (!stored || JSON.stringify(stored) !== JSON.stringify(next)) {
      await writeCandidate(this.#paths, id, next);
    }
    if (earlier?.manifest !== candidate.manifest || earlier.why !== why) {
      this.#opts.log.info("candidate waits; the kept version stays in place", {
        id,
        version: candidate.version,
        why,
      });
    }
  }

  /**
   * Makes the candidate the kept version, in an order a crash at any point leaves whole (see
   * docs/design.md#versions): its files into its own directories, then its version's
   * manifest, then the inactive manifest (one rename: the switch), then the candidate and the
   * versions no longer kept go. Files that cannot all be stored keep it waiting.
   */
  async #promote(
    work: Work,
    sanitized: SanitizedCheckpoint,
    candidate: Candidate,
    previous: number,
  ): Promise<boolean> {
    const { config, log, writes } = this.#opts;
    const { id, now } = work;
    const version = candidate.version;
    const complete = work.apiAvailable && await this.#storeFiles(work, sanitized, version);
    if (!complete) {
      await this.#watch(id, { ...candidate, kept: previous }, "its files cannot all be stored yet");
      return false;
    }
    this.#refreshedAt.set(id, now);
    await writeVersion(this.#paths, id, version, {
      origin: originNow(work.parent, now),
      manifest: candidate.manifest,
    });
    await writeInactiveManifest(this.#paths, sanitized.pod, work.file);
    this.#candidates.delete(id);
    await removeCandidate(this.#paths, id);
    const dropped = await pruneVersions(this.#paths, id, {
      keep: config.checkpointVersions,
      kept: version,
      inUse: await manifestTexts(this.#paths, id, work.file),
    });
    writes.applied(work.out, { op: "promote", id, detail: `version ${previous} → ${version}` });
    log.info("candidate promoted", {
      id,
      from: previous,
      version,
      readyFor: candidate.readySince === undefined
        ? undefined
        : `${Number(now - candidate.readySince) / 1e9} s`,
      ...(dropped.length > 0 ? { versionsRemoved: dropped } : {}),
    });
    return true;
  }

  /**
   * A parent with no version in place that has a predecessor (lib/core/lineage.ts) inherits the
   * predecessor's version in place as its first, re-made for its own identity, in the order of
   * a promotion (docs/design.md#lineage): the files, copied into its own directories; then at
   * once the pin, if the predecessor is pinned, what the version was made from and its manifest;
   * the inactive manifest, the switch. A crash before the switch leaves no version in place, and
   * the next pass inherits again, as the same version. True when it inherited.
   */
  async #inherit(work: Work, stored: StoredVersions): Promise<boolean> {
    const { config, log, writes } = this.#opts;
    const { id, parent, now } = work;
    const { namespace, name } = parent.metadata;
    const predecessor = findPredecessor(
      parent,
      id,
      await versionsInPlace(this.#paths, parent, id, work.lineage),
    );
    if (!predecessor) return false;
    const heir = inheritedParent(predecessor.parent, parent);
    const access = storedAccess(heir, agentUid());
    if ("error" in access) return false;
    const version = firstVersion(heir, config, stored);
    const sanitized = sanitizeCheckpoint(heir, config, version);
    const from = { id: predecessor.id, version: predecessor.version };
    const files = await copyVolumeFiles(
      sanitized.volumes,
      sameDirIn(config, { namespace, name, version }, {
        name: predecessor.parent.metadata.name,
        version: predecessor.version,
      }),
      access,
      { maxBytes: config.checkpointMaxBytes },
    );
    // What the predecessor has no files for is fetched, as a first version's files are: a copy
    // that mounts nothing there would not start either.
    const missing = sanitized.volumes.filter((v) =>
      files.skipped.some((s) => s.volume === v.volume)
    );
    const left = new Set(missing.map((v) => v.volume));
    if (missing.length > 0 && work.apiAvailable) {
      const objects = await this.#fetchObjects(namespace, missing, work.refresh);
      const fetched = await writeVolumeFiles(missing, objects.data, access, {
        maxBytes: config.checkpointMaxBytes,
      });
      left.clear();
      for (const s of fetched.skipped) left.add(s.volume);
    }
    for (const s of files.skipped) {
      log.warn("the predecessor has no files for an inherited volume", {
        id,
        ...s,
        fetched: !left.has(s.volume),
      });
    }
    const { pinned } = await readStoredVersions(this.#paths, predecessor.id);
    await writeVersion(this.#paths, id, version, {
      origin: originNow(heir, now, from),
      manifest: renderManifest(sanitized.pod),
      ...(pinned ? { pin: pinned } : {}),
    });
    await writeInactiveManifest(this.#paths, sanitized.pod, work.file);
    this.#refreshedAt.set(id, now);
    this.#superseded.add(predecessor.id);
    writes.applied(work.out, {
      op: "inherit",
      id,
      detail: `version ${version} from ${from.id} version ${from.version}`,
    });
    log.info("checkpoint inherited from its predecessor", {
      id,
      version,
      from: from.id,
      fromVersion: from.version,
      ...(pinned ? { pinned: pinned.pinnedAt } : {}),
    });
    return true;
  }

  async #discard(id: string, why: string) {
    this.#candidates.delete(id);
    if (await removeCandidate(this.#paths, id) === "removed") {
      this.#opts.log.info("candidate discarded; the kept version stays", { id, why });
    }
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
    const api = this.#opts.apiServer;
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
          this.#opts.failures.failed(got.failure, true);
        }
      }
    }
    return { data, complete };
  }

  /**
   * After a refresh of the kept version: what it was made from and the trees it looked at, if
   * every file was stored from watched objects and nothing in the trees was just changed.
   */
  #stampInPlace(work: Work, version: number) {
    const { id, parent, now } = work;
    const objects = this.#objects.get(id);
    if (this.#refreshedAt.get(id) !== now || objects?.versions === undefined) return;
    const { namespace, name } = parent.metadata;
    const trees = TreeStamp.take(
      [
        versionsDir(this.#paths, id),
        ...versionFileDirs(this.#opts.config, namespace, name, version),
      ],
      Date.now(),
    );
    if (trees) this.#inPlace.set(id, { inputs: `${work.parentKey} ${objects.versions}`, trees });
  }

  /**
   * The parent and its objects' versions are those of the refresh that last found its kept
   * version and every file in place, and nothing in its trees has changed since.
   */
  #stillInPlace(id: string, parentKey: string): boolean {
    const inPlace = this.#inPlace.get(id);
    const objects = this.#objects.get(id);
    if (inPlace === undefined || objects === undefined) return false;
    const versions = this.#versionsOf(objects.refs);
    return versions !== undefined && inPlace.inputs === `${parentKey} ${versions}` &&
      inPlace.trees.unchanged();
  }

  /** The versions of watched objects, one string; undefined while one is not known. */
  #versionsOf(refs: readonly ObjectRef[]): string | undefined {
    const versions = refs.map((ref) => this.#opts.apiServer.objectVersion?.(ref));
    return versions.every((v) => v !== undefined) ? versions.join(" ") : undefined;
  }

  /** The watches know versions of the parent's objects other than those its files were stored
   *  from (or stored before they were watched): the files are refreshed, from the watches. */
  #objectsChanged(id: string): boolean {
    const known = this.#objects.get(id);
    if (known === undefined) return false;
    const now = this.#versionsOf(known.refs);
    return now !== undefined && now !== known.versions;
  }

  /**
   * Whether no checkpoint of `parent` can be made this pass: one object's failure, not the
   * pass's, said when it starts, once for each new reason while it lasts, and when it ends
   * (problem_log.ts). Its kept version, if it has one, stays as it is.
   */
  #refuse(id: string, parent: Pod): boolean {
    // A parent whose digest is kept passed this check when it was taken.
    const why = this.#parentKeys.has(parent)
      ? undefined
      : this.#refusals.get(parent) ?? refusal(parent, this.#opts.config);
    if (why === undefined) {
      this.#refused.over(id);
      return false;
    }
    if (isFrozenWhole(parent)) this.#refusals.set(parent, why);
    this.#refused.there(id, {
      level: "error",
      msg: "no checkpoint can be made of this parent; its kept version stays",
      about: { id },
      fields: { error: why },
      what: why,
    });
    return true;
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
}
