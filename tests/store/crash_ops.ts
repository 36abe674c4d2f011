/**
 * The crash test's sequence of writes, shared by the child that performs them and the parent
 * that checks what survived: write number `seq` goes to one key and carries `seq` in its record,
 * alternating between the two stores and cycling over KEYS keys of each.
 */
import { formatInstant, NANOS_PER_SECOND } from "../../lib/core/time.ts";
import type { SandboxCheckpoint } from "../../lib/store/sandbox_checkpoint.ts";
import type { SandboxStore } from "../../lib/store/sandbox_store.ts";
import type { StatusRecord } from "../../lib/store/status_record.ts";
import type { StatusStore } from "../../lib/store/status_store.ts";
import { sandboxCheckpoint, statusRecord } from "./records.ts";

export const KEYS = 4;

export interface Op {
  store: "status" | "sandbox";
  key: string;
}

export function opOf(seq: number): Op {
  const slot = Math.floor(seq / 2) % KEYS;
  return seq % 2 === 0
    ? { store: "status", key: `crash/rec-${slot}` }
    : { store: "sandbox", key: `sandbox-${slot}` };
}

/** Every key the sequence writes, in the order of its first writes. */
export const ALL_OPS: Op[] = Array.from({ length: 2 * KEYS }, (_, seq) => opOf(seq));

/** Records of varying length and shape, so a torn write could not pass for a whole one. */
export function statusAt(key: string, seq: number): StatusRecord {
  const grace = seq % 3 === 0;
  return statusRecord(key, {
    state: grace ? "active-grace" : "inactive",
    ...(grace ? { graceEnd: formatInstant(BigInt(seq) * NANOS_PER_SECOND) } : {}),
    lastActivatedAt: formatInstant(BigInt(seq) * NANOS_PER_SECOND),
    message: `${seq}`.padEnd(seq % 200, "."),
  });
}

const NETNS_PREFIX = "/var/run/netns/cni-";

export function sandboxAt(seq: number): SandboxCheckpoint {
  const checkpoint = sandboxCheckpoint();
  return {
    ...checkpoint,
    netnsPath: `${NETNS_PREFIX}${seq}`,
    portMappings: checkpoint.portMappings.slice(0, seq % 3),
  };
}

export interface Stores {
  statuses: StatusStore;
  sandboxes: SandboxStore;
}

/** Performs write number `seq`; resolves once it is durable. */
export async function write(stores: Stores, seq: number): Promise<void> {
  const op = opOf(seq);
  if (op.store === "status") await stores.statuses.update(op.key, () => statusAt(op.key, seq));
  else await stores.sandboxes.create(op.key, sandboxAt(seq));
}

/** The sequence number of the write a key holds, undefined when it holds none. */
export function seqIn(stores: Stores, op: Op): number | undefined {
  if (op.store === "status") {
    const record = stores.statuses.get(op.key);
    return record && Number.parseInt(record.message, 10);
  }
  const checkpoint = stores.sandboxes.get(op.key);
  return checkpoint && Number(checkpoint.netnsPath.slice(NETNS_PREFIX.length));
}
