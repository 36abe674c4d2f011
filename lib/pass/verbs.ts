/**
 * The operator's verbs on one checkpoint (docs/design.md#verbs): pin, unpin, rollback, purge.
 * The same code runs inside the agent (the admin endpoint, between two passes) and in a command
 * with no agent running (under the agent's lock): both change only the checkpoint trees and the
 * status store, so the next pass starts from what the verb left.
 *
 * Every verb is idempotent: done twice, the second changes nothing and says so.
 */
import type { Config } from "../config/types.ts";
import {
  checkpointPaths,
  type CheckpointTrees,
  hostPathsOf,
  podFileDirs,
  validId,
  versionsDir,
} from "../core/checkpoint_layout.ts";
import { parseValidId } from "../core/ids.ts";
import { formatInstant, type Instant } from "../core/time.ts";
import { pathExists } from "../disk/dirs.ts";
import {
  activateCheckpoint,
  activeManifestFile,
  deactivateCheckpoint,
  manifestFilesOnDisk,
  removeCheckpoint,
  writeInactiveManifest,
} from "../disk/manifests.ts";
import {
  parseManifestText,
  readKept,
  readStoredVersions,
  removePin,
  type VersionsView,
  versionsView,
  writePin,
} from "../disk/versions.ts";
import type { AgentStores } from "../store/agent_stores.ts";
import type { Logger } from "../util/log.ts";

export const VERBS = ["pin", "unpin", "rollback", "purge"] as const;
export type VerbName = typeof VERBS[number];

export interface VerbRequest {
  verb: VerbName;
  id: string;
  /** rollback: the version to make the checkpoint; default the one before the newest. */
  to?: number;
  /** purge: also when the checkpoint is active. */
  force?: boolean;
}

export interface VerbResult {
  verb: VerbName;
  id: string;
  /** False when the checkpoint already was as the verb asks. */
  changed: boolean;
  /** rollback: the kept version was replaced (not only pinned). */
  rolledBack?: true;
  message: string;
  /** The checkpoint's versions after the verb; absent after a purge. */
  versions?: VersionsView;
}

/** Why a verb was refused: `status` is the admin endpoint's answer. */
export class VerbError extends Error {
  constructor(readonly status: 400 | 404 | 409, message: string) {
    super(message);
    this.name = "VerbError";
  }
}

export const BAD_ID = "bad checkpoint id: expected <namespace>/<name> with Kubernetes names";

/** The file name of a checkpoint's manifests, or VerbError when there is no such checkpoint. */
async function manifestFileOf(trees: CheckpointTrees, id: string): Promise<string> {
  if (!parseValidId(id)) throw new VerbError(400, BAD_ID);
  const file = (await manifestFilesOnDisk(trees)).get(id);
  if (file === undefined) throw new VerbError(404, `no checkpoint ${id}`);
  return file;
}

/**
 * What a purge works on: the checkpoint's manifest file, or undefined when no manifest is left
 * but something else of it is (a purge or a removal cut short: its versions, its files, its
 * status record), which a purge finishes.
 */
async function purgeTarget(
  trees: CheckpointTrees,
  stores: AgentStores,
  id: string,
): Promise<string | undefined> {
  try {
    return await manifestFileOf(trees, id);
  } catch (e) {
    if (!(e instanceof VerbError) || e.status !== 404) throw e;
    const { namespace, name } = validId(id);
    const leftovers = [versionsDir(trees, id), ...podFileDirs(trees, namespace, name)];
    const exists = await Promise.all(leftovers.map(pathExists));
    if (stores.peekStatus(id) === undefined && !exists.includes(true)) throw e;
    return undefined;
  }
}

/**
 * Runs one verb. `stores`: the agent's (its memory is the truth of its next pass), or stores
 * opened under the lock by a command. `now` stamps a pin.
 */
export async function runVerb(
  config: Config,
  stores: AgentStores,
  request: VerbRequest,
  now: Instant,
  log: Logger,
): Promise<VerbResult> {
  const result = await applyVerb(config, stores, request, now);
  log.info(`checkpoint ${request.verb}`, {
    id: result.id,
    changed: result.changed,
    message: result.message,
    ...(request.to !== undefined ? { to: request.to } : {}),
    ...(request.force ? { force: true } : {}),
  });
  return result;
}

async function applyVerb(
  config: Config,
  stores: AgentStores,
  request: VerbRequest,
  now: Instant,
): Promise<VerbResult> {
  const { id, verb } = request;
  const file = verb === "purge"
    ? await purgeTarget(config, stores, id)
    : await manifestFileOf(config, id);
  const done = async (changed: boolean, message: string): Promise<VerbResult> => ({
    verb,
    id,
    changed,
    message,
    ...(file === undefined || verb === "purge"
      ? {}
      : { versions: await versionsView(config, id, file) }),
  });
  switch (verb) {
    case "pin": {
      const { pinned } = await readStoredVersions(config, id);
      if (pinned) return await done(false, `already pinned since ${pinned.pinnedAt}`);
      await writePin(config, id, { pinnedAt: formatInstant(now) });
      return await done(true, "pinned: no candidate is promoted until unpinned");
    }
    case "unpin": {
      const removed = await removePin(config, id) === "removed";
      return await done(removed, removed ? "unpinned" : "was not pinned");
    }
    case "rollback":
      return await rollback(config, id, file!, request.to, now, done);
    case "purge": {
      const active = await activeManifestFile(config, id);
      if (active !== undefined && !request.force) {
        throw new VerbError(
          409,
          `${id} is active: its copy runs from the static-pod dir; purge --force withdraws it`,
        );
      }
      if (active !== undefined) await deactivateCheckpoint(config, id);
      await removeCheckpoint(config, id);
      stores.forgetStatus(id);
      await stores.record();
      const what = file === undefined
        ? "what an interrupted purge or removal left (no manifest) removed"
        : `purged${active !== undefined ? " (its active copy withdrawn)" : ""}`;
      return await done(
        true,
        `${what}; ` +
          "a parent still asking to be checkpointed gets a new first version on the next pass",
      );
    }
  }
}

/**
 * Makes an older version the checkpoint, and pins it so that the spec it replaces is not
 * promoted again at once. If the checkpoint is active, its manifest in the static-pod dir is
 * replaced too: the kubelet sees the file change and runs the copy of that version.
 */
async function rollback(
  config: Config,
  id: string,
  file: string,
  to: number | undefined,
  now: Instant,
  done: (changed: boolean, message: string) => Promise<VerbResult>,
): Promise<VerbResult> {
  const { inactiveManifest } = checkpointPaths(config, id, file);
  const { kept, stored } = await readKept(config, id, inactiveManifest);
  const numbers = stored.versions.map((v) => v.version);
  const target = to ?? numbers.at(-2);
  const version = stored.versions.find((v) => v.version === target);
  if (target === undefined || !version) {
    const which = to === undefined ? "older version" : `version ${to}`;
    throw new VerbError(404, `${id} has no ${which} (versions: ${numbers.join(", ") || "none"})`);
  }
  const pod = parseManifestText(version.text);
  if (!pod) throw new VerbError(409, `version ${target} of ${id} cannot be read`);
  for (const dir of hostPathsOf(pod)) {
    const ours = [config.secretsDir, config.configmapsDir].some((d) => dir.startsWith(`${d}/`));
    if (ours && !await pathExists(dir)) {
      throw new VerbError(409, `version ${target} of ${id} lacks its files (${dir})`);
    }
  }
  const { pinned } = stored;
  if (!pinned) await writePin(config, id, { pinnedAt: formatInstant(now) });
  if (kept === target) {
    return await done(!pinned, `version ${target} is already the checkpoint; pinned`);
  }
  await writeInactiveManifest(config, pod, file);
  const active = await activeManifestFile(config, id);
  if (active !== undefined) await activateCheckpoint(config, id, file);
  return {
    ...await done(
      true,
      `version ${target} is the checkpoint (was ${kept ?? "none"}); pinned` +
        (active !== undefined ? "; the active copy was replaced through the kubelet" : ""),
    ),
    rolledBack: true,
  };
}
