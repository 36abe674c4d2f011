/**
 * What the admin endpoint and `ckpt-agent status` show of a checkpoint: its state and deadline,
 * its status record (with the derived phase), and where its files are. Pure: built from a status
 * record and the configured directories, so the daemon and a read of the state directory give
 * the same view.
 */
import { splitId } from "../core/ids.ts";
import { parseInstant } from "../core/time.ts";
import {
  type CheckpointPaths,
  checkpointPaths,
  type CheckpointTrees,
} from "../core/checkpoint_layout.ts";
import type { VersionsView } from "../disk/versions.ts";
import type { SandboxCheckpoint } from "../store/sandbox_checkpoint.ts";
import {
  type Phase,
  phaseOf,
  type StatusRecord,
  type StatusState,
} from "../store/status_record.ts";

export interface CheckpointView {
  id: string;
  namespace: string;
  name: string;
  state: StatusState;
  /** The grace deadline of inactive-grace and active-grace. */
  graceEnd?: string;
  /** The last transition of its lifecycle: the latest of created, activated, deactivated. */
  since: string;
  status: StatusRecord & { phase: Phase };
  paths: CheckpointPaths;
  /** Its versions (docs/design.md#versions), when they could be read. */
  versions?: CheckpointVersions;
}

/** The versions of a checkpoint as shown: what is on disk, and what the agent watches. */
export interface CheckpointVersions extends VersionsView {
  candidate?: VersionsView["candidate"] & {
    /** Why it is not promoted yet, as the running agent last decided. */
    waiting?: string;
    /**
     * True when the running agent's last pass judged its parent crash-looping on it
     * (docs/design.md#crash-loops): the kept version stands in.
     */
    crashLooping?: true;
  };
}

export interface SandboxView {
  id: string;
  checkpoint: SandboxCheckpoint;
}

/** The latest of the record's lifecycle timestamps, compared as instants (not as text). */
export function sinceOf(record: StatusRecord): string {
  const stamps = [record.createdAt, record.lastActivatedAt, record.lastDeactivatedAt]
    .filter((s): s is string => s !== undefined);
  return stamps.reduce((latest, s) => parseInstant(s)! > parseInstant(latest)! ? s : latest);
}

/**
 * The view of one record; the store validated its id, so its paths can be built. `manifestFile`:
 * the name its manifests have (lib/core/manifest_names.ts); unset, bootkube's.
 */
export function checkpointView(
  record: StatusRecord,
  dirs: CheckpointTrees,
  manifestFile?: string,
  versions?: CheckpointVersions,
): CheckpointView {
  const { namespace, name } = splitId(record.id)!;
  return {
    id: record.id,
    namespace,
    name,
    state: record.state,
    ...(record.graceEnd !== undefined ? { graceEnd: record.graceEnd } : {}),
    since: sinceOf(record),
    status: { ...record, phase: phaseOf(record) },
    paths: checkpointPaths(dirs, record.id, manifestFile),
    ...(versions ? { versions } : {}),
  };
}
