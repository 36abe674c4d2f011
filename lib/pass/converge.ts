/**
 * Apply, second part: stop, then start, then remove, so that every tracked checkpoint converges
 * to its action: a stopped checkpoint has no manifest in the static-pod dir, a started one has
 * its inactive manifest there, a removed one has no file left at all.
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

export async function converge(
  paths: CheckpointTrees,
  writes: Writes,
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
  await writes.forEachCheckpoint(report, stops, async (id, out) => {
    await writes.attempt(out, "stop", id, async () => {
      if (await deactivateCheckpoint(paths, id) === "removed") {
        writes.applied(out, { op: "stop", id });
      }
    });
  });
  // Each start is linked into the static-pod dir without an fsync of the directory; the
  // directory is fsynced once for all of them, and only then is each start applied (durable). A
  // failover at 1,000 parents otherwise waited on a thousand fsyncs of one directory.
  const starts = ids("start");
  const linked = new Set<string>();
  await writes.forEachCheckpoint(report, starts, async (id, out) => {
    await writes.attempt(out, "start", id, async () => {
      const file = names.names.get(id);
      const outcome = file === undefined
        ? "no-inactive-manifest"
        : await activateCheckpoint(paths, id, file, false);
      if (outcome === "written") linked.add(id);
      if (outcome === "no-inactive-manifest") {
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
  if (linked.size > 0) {
    const unsynced = await syncDir(paths.staticPodDir).then(() => undefined, (e: Error) => e);
    for (const id of starts) {
      if (!linked.has(id)) continue;
      if (unsynced) await writes.attempt(report, "start", id, () => Promise.reject(unsynced));
      else writes.applied(report, { op: "start", id });
    }
  }
  await writes.forEachCheckpoint(report, ids("remove"), async (id, out) => {
    await writes.attempt(out, "remove", id, async () => {
      await removeCheckpoint(paths, id);
      writes.applied(out, { op: "remove", id });
    });
  });
}
