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
  podFileDirs,
  storedFilesOwner,
} from "../core/checkpoint_layout.ts";
import { parseValidId } from "../core/ids.ts";
import type { ManifestNames } from "../core/manifest_names.ts";
import type { PassResult } from "../core/pass.ts";
import { sanitizeCheckpoint } from "../core/sanitize.ts";
import { type Instant, millisToDuration } from "../core/time.ts";
import { writeInactiveManifest } from "../disk/manifests.ts";
import {
  type ObjectData,
  objectKey,
  removeStaleVolumeDirs,
  writeVolumeFiles,
} from "../disk/pod_files.ts";
import { VerifiedFiles } from "../disk/verified_files.ts";
import type { ApiServerClient } from "../sources/apiserver.ts";
import type { ObjectRef } from "../sources/object_watches.ts";
import type { FailureKind } from "../sources/types.ts";
import type { Logger } from "../util/log.ts";
import type { Observation } from "./observe.ts";
import type { PassReport } from "./report.ts";
import type { SourceFailureLog } from "./source_failures.ts";
import type { Writes } from "./writes.ts";

/** The parents whose checkpoints this pass writes. */
export function checkpointedIds(result: PassResult): string[] {
  return [...result.parents.keys()].filter((id) => result.tracked.has(id) && parseValidId(id));
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
  writes: Writes;
  failures: SourceFailureLog;
}

export class CheckpointWriter {
  readonly #opts: CheckpointWriterOptions;
  readonly #paths: CheckpointTrees;
  /** Per parent: when its secrets and configmaps were last stored. */
  readonly #refreshedAt = new Map<string, Instant>();
  /** Per parent: the sanitizer's warnings last logged, so that each is said once. */
  readonly #warned = new Map<string, string>();
  /** Inactive manifests known to be what their parent (the key) makes of them. */
  readonly #checkedManifests = new VerifiedFiles();
  /** Per parent: the objects it needs, and their versions when its files were last stored. */
  readonly #objects = new Map<string, { refs: ObjectRef[]; versions?: string }>();

  constructor(opts: CheckpointWriterOptions) {
    this.#opts = opts;
    this.#paths = opts.config;
  }

  /** The sanitized manifest of every tracked parent, then its secrets and configmaps. */
  async write(result: PassResult, obs: Observation, names: ManifestNames, report: PassReport) {
    const { config, writes } = this.#opts;
    const now = obs.input.now;
    const apiAvailable = obs.input.observations.apiAvailable;
    const ids = checkpointedIds(result);
    const blocked = new Map(names.blocked.map((b) => [b.id, b.reason]));
    const manifestOf = (id: string, file: string) =>
      checkpointPaths(this.#paths, id, file).inactiveManifest;
    const refresh: Refresh = { apiUnavailable: false };
    await writes.forEachCheckpoint(report, ids, async (id, out) => {
      const parent = result.parents.get(id)!;
      await writes.attempt(out, "checkpoint", id, async () => {
        const owner = storedFilesOwner(parent);
        if ("error" in owner) throw new Error(`cannot store files for this pod: ${owner.error}`);
        const file = names.names.get(id);
        if (file === undefined) {
          throw new Error(`no file name is free for its manifest (${blocked.get(id)}); left alone`);
        }
        const last = this.#refreshedAt.get(id);
        const refreshDue = last === undefined ||
          now - last >= millisToDuration(config.refreshIntervalMs) || this.#objectsChanged(id);
        // The manifest is made from the parent alone: the same parent, and a file untouched
        // since it was last checked, mean nothing to do until the refresh falls due.
        const manifest = manifestOf(id, file);
        const parentJson = JSON.stringify(parent);
        if (!refreshDue && this.#checkedManifests.unchanged(manifest, parentJson)) return;
        const sanitized = sanitizeCheckpoint(parent, config);
        this.#warnOnce(id, sanitized.warnings);
        const written = await writeInactiveManifest(this.#paths, sanitized.pod, file);
        this.#checkedManifests.checked(manifest, parentJson);
        if (written === "written") writes.applied(out, { op: "checkpoint", id });
        if (!(refreshDue || written === "written") || !apiAvailable) return;
        const refs = objectRefs(parent.metadata.namespace, sanitized.volumes);
        const versions = this.#versionsOf(refs);
        const objects = await this.#fetchObjects(
          parent.metadata.namespace,
          sanitized.volumes,
          refresh,
        );
        const files = await writeVolumeFiles(sanitized.volumes, objects.data, owner);
        const { namespace, name } = parent.metadata;
        const stale = await removeStaleVolumeDirs(
          podFileDirs(config, namespace, name),
          sanitized.volumes,
        );
        files.removed += stale.length;
        if (files.written + files.removed > 0) {
          writes.applied(out, {
            op: "files",
            id,
            detail: `${files.written} written, ${files.removed} removed`,
          });
        }
        for (const s of files.skipped) {
          this.#opts.log.warn("volume files kept as they were", { id, ...s });
        }
        // Retry next pass unless everything was fetched and written.
        const stored = objects.complete && files.skipped.length === 0;
        if (stored) this.#refreshedAt.set(id, now);
        else this.#refreshedAt.delete(id);
        this.#objects.set(id, { refs, ...(stored ? { versions } : {}) });
      });
    });
    for (const memory of [this.#refreshedAt, this.#warned, this.#objects]) {
      for (const id of memory.keys()) if (!result.tracked.has(id)) memory.delete(id);
    }
    // The objects the checkpoints need are watched, and no others.
    this.#opts.apiServer.watchObjects?.([...this.#objects.values()].flatMap((o) => o.refs));
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
