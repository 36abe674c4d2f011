/**
 * Apply, around the checkpoint writes: stop before them, start and remove after them, so that
 * every tracked checkpoint converges to its action: a stopped checkpoint has no manifest in the
 * static-pod dir, a started one has its inactive manifest there, a removed one has no file left
 * at all.
 */
import type { CheckpointTrees } from "../core/checkpoint_layout.ts";
import { parseValidId } from "../core/ids.ts";
import { filesHolding, type ManifestNames } from "../core/manifest_names.ts";
import type { PassResult } from "../core/pass.ts";
import { type Action, actionOf } from "../core/state.ts";
import { syncDir } from "../disk/atomic_write.ts";
import { activateCheckpoint, deactivateCheckpoint, removeCheckpoint } from "../disk/manifests.ts";
import type { Observation } from "./observe.ts";
import type { PassReport } from "./report.ts";
import type { Writes } from "./writes.ts";

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

/** The tracked checkpoints whose action is `action`. */
function idsOf(desired: ReadonlyMap<string, Action>, action: Action): string[] {
  return [...desired].filter(([, a]) => a === action).map(([id]) => id);
}

/**
 * Applies `op` for each of `ids` in `done` once the static-pod dir, where they were linked or
 * unlinked without an fsync each, is fsynced: once for all of them. A failover or a withdrawal
 * at 1,000 parents otherwise waited on a thousand fsyncs of one directory.
 */
async function appliedOnceSynced(
  paths: CheckpointTrees,
  writes: Writes,
  report: PassReport,
  op: "start" | "stop",
  ids: readonly string[],
  done: ReadonlySet<string>,
) {
  if (done.size === 0) return;
  const unsynced = await syncDir(paths.staticPodDir).then(() => undefined, (e: Error) => e);
  for (const id of ids) {
    if (!done.has(id)) continue;
    if (unsynced) await writes.attempt(report, op, id, () => Promise.reject(unsynced));
    else writes.applied(report, { op, id });
  }
}

/**
 * Stop: the active manifest of every checkpoint to stop is deleted, durably. A pass does this
 * before it writes any checkpoint: a copy whose parent is back competes with it (for its ports,
 * among others), and must not wait for a thousand checkpoints to be looked at.
 */
export async function withdraw(
  paths: CheckpointTrees,
  writes: Writes,
  result: PassResult,
  obs: Observation,
  report: PassReport,
) {
  const active = obs.manifestFiles.active;
  // Nothing to delete for a stop whose active manifest was not there when this pass read the
  // directory: a steady pass then makes no call per inactive checkpoint.
  const stops = idsOf(desiredActions(result), "stop").filter((id) =>
    !parseValidId(id) || filesHolding(active, id).length > 0
  );
  const removed = new Set<string>();
  await writes.forEachCheckpoint(report, stops, async (id, out) => {
    await writes.attempt(out, "stop", id, async () => {
      if (await deactivateCheckpoint(paths, id, undefined, false) === "removed") removed.add(id);
    });
  });
  await appliedOnceSynced(paths, writes, report, "stop", stops, removed);
}

/**
 * Start, then remove: after the checkpoint writes, which a start links. `refused`: no checkpoint
 * of this parent can be made, and the log said so (CheckpointWriter.refused); a start without
 * an inactive manifest is then no error of its own.
 */
export async function converge(
  paths: CheckpointTrees,
  writes: Writes,
  result: PassResult,
  obs: Observation,
  names: ManifestNames,
  report: PassReport,
  refused: (id: string) => boolean = () => false,
) {
  const desired = desiredActions(result);
  const active = obs.manifestFiles.active;
  const starts = idsOf(desired, "start");
  const linked = new Set<string>();
  await writes.forEachCheckpoint(report, starts, async (id, out) => {
    await writes.attempt(out, "start", id, async () => {
      const file = names.names.get(id);
      const outcome = file === undefined
        ? "no-inactive-manifest"
        : await activateCheckpoint(paths, id, file, false);
      if (outcome === "written") linked.add(id);
      if (outcome === "no-inactive-manifest" && !refused(id)) {
        throw new Error(
          "no inactive manifest to activate (it will be written when the parent is seen)",
        );
      }
      // A copy under its other name would be a second static pod of the same name.
      if (filesHolding(active, id).some((f) => f !== file)) {
        await deactivateCheckpoint(paths, id, file);
      }
    });
  });
  await appliedOnceSynced(paths, writes, report, "start", starts, linked);
  await writes.forEachCheckpoint(report, idsOf(desired, "remove"), async (id, out) => {
    await writes.attempt(out, "remove", id, async () => {
      await removeCheckpoint(paths, id);
      writes.applied(out, { op: "remove", id });
    });
  });
}
