/**
 * Persist, the last phase of a pass: what the agent holds of each checkpoint after it (one status
 * record each), the sandboxes that run active checkpoints, and writing whatever is not recorded
 * yet to the state dir. Activation never waits for this: a state dir that refuses writes only
 * makes the pass incomplete.
 */
import type { PassResult, StateChange } from "../core/pass.ts";
import { copyPodId } from "../core/ids.ts";
import { explainChange } from "../core/reasons.ts";
import { actionOf, type CheckpointState } from "../core/state.ts";
import { formatInstant, type Instant } from "../core/time.ts";
import type { RunningPod, RuntimeClient } from "../sources/cri.ts";
import type { AgentStores, StoreName, Unrecorded } from "../store/agent_stores.ts";
import { SANDBOX_CHECKPOINT_VERSION } from "../store/sandbox_checkpoint.ts";
import { stateOfRecord, type StatusRecord } from "../store/status_record.ts";
import { desiredActions } from "./converge.ts";
import { type PassReport, RECORD_OPS } from "./report.ts";
import type { SourceFailureLog } from "./source_failures.ts";
import type { Writes } from "./writes.ts";

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

function recordMatches(record: StatusRecord | undefined, state: CheckpointState): boolean {
  if (!record) return false;
  return record.state === state.name &&
    record.graceEnd === ("graceEnd" in state ? formatInstant(state.graceEnd) : undefined);
}

/** What the agent holds of each checkpoint after this pass: one status record each. */
export function trackStatus(stores: AgentStores, result: PassResult, now: Instant) {
  const changes = new Map(result.changes.map((c) => [c.id, c]));
  for (const [id, state] of result.tracked) {
    const change = changes.get(id);
    const current = stores.peekStatus(id);
    if (!change && recordMatches(current, state)) continue;
    stores.setStatus(id, nextStatusRecord(current, id, state, change, now));
  }
  for (const { id } of stores.status.peekAll()) {
    if (!result.tracked.has(id)) stores.forgetStatus(id);
  }
}

/** Keeps the sandboxes that run active checkpoints, and forgets the others. */
export async function trackSandboxes(
  stores: AgentStores,
  result: PassResult,
  running: RunningPod[],
  node: { nodeName: string; runtime: RuntimeClient; failures: SourceFailureLog },
) {
  const runningById = new Map(running.map((pod) => [`${pod.namespace}/${pod.name}`, pod]));
  const wanted = new Set<string>();
  for (const [id, action] of desiredActions(result)) {
    if (action !== "start") continue;
    const copy = runningById.get(copyPodId(id, node.nodeName));
    for (const sandboxId of copy?.sandboxIds ?? []) wanted.add(sandboxId);
  }
  const known = new Set(stores.sandboxes.list());
  for (const sandboxId of wanted) {
    if (known.has(sandboxId)) continue;
    const status = await node.runtime.sandboxStatus(sandboxId);
    if (!status.ok) {
      node.failures.failed(status.failure, true);
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

function recordOp(u: Unrecorded): typeof RECORD_OPS[number] {
  if (u.store === "status") return "status";
  return u.op === "write" ? "sandbox-record" : "sandbox-forget";
}

/**
 * Writes what this pass (or an earlier one) left unrecorded. A record that cannot be written
 * is an error of the pass and is written again by the next one; they are said in one line
 * (Writes.unrecorded).
 */
export async function recordAll(
  stores: AgentStores,
  report: PassReport,
  writes: Writes,
  cut?: AbortSignal,
): Promise<number> {
  const outcome = await stores.record(cut);
  const left = outcome.status.left + outcome.sandboxes.left;
  for (const sandboxId of outcome.sandboxes.written) {
    const s = stores.sandboxes.get(sandboxId)!;
    writes.applied(report, {
      op: "sandbox-record",
      id: sandboxId,
      detail: `${s.namespace}/${s.name}`,
    });
  }
  for (const sandboxId of outcome.sandboxes.deleted) {
    writes.applied(report, { op: "sandbox-forget", id: sandboxId });
  }
  const unrecorded = [...outcome.status.unrecorded, ...outcome.sandboxes.unrecorded];
  if (unrecorded.length === 0) return left;
  for (const u of unrecorded) {
    report.errors.push({ op: recordOp(u), id: u.key, message: u.error });
  }
  const keys = (store: StoreName) => unrecorded.filter((u) => u.store === store).map((u) => u.key);
  writes.unrecorded(unrecorded[0].error, {
    path: unrecorded[0].path,
    checkpoints: keys("status"),
    sandboxes: keys("sandboxes"),
  });
  return left;
}
