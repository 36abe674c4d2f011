/**
 * A pod sandbox checkpoint: the network facts of a sandbox that ran an activated checkpoint, as the
 * container runtime reported them.
 */
import * as v from "valibot";
import { int, strictObject } from "../core/schema.ts";
import { isCidr } from "../util/ip.ts";
import { isValidNamespace, isValidObjectName } from "../core/ids.ts";
import { isSandboxFileName, SANDBOX_DIR, sandboxFileName, sandboxIdProblem } from "./layout.ts";
import type { RecordType } from "./record_files.ts";
import type { StoreCodec } from "./record_store.ts";

/**
 * The version of the checkpoint's own shape (its `version` field), apart from the version of the
 * record envelope it is stored in.
 */
export const SANDBOX_CHECKPOINT_VERSION = "v1";

const Port = v.pipe(int(), v.minValue(1), v.maxValue(65535));

export const PortMappingSchema = strictObject({
  protocol: v.picklist(["tcp", "udp", "sctp"]),
  containerPort: Port,
  /** 0 when the port is not published on the host, as in CRI. */
  hostPort: v.pipe(int(), v.minValue(0), v.maxValue(65535)),
});

const NOT_CIDR = "not an IPv4 or IPv6 address in CIDR form";

export const InterfaceSchema = strictObject({
  name: v.pipe(v.string(), v.minLength(1)),
  /** The interface's address with its prefix length, e.g. `10.244.0.5/24` or `fd00::5/64`. */
  address: v.pipe(v.string(NOT_CIDR), v.check(isCidr, NOT_CIDR)),
});

export const SandboxCheckpointSchema = strictObject({
  version: v.literal(SANDBOX_CHECKPOINT_VERSION),
  name: v.pipe(v.string(), v.check(isValidObjectName, "not a Kubernetes object name")),
  namespace: v.pipe(v.string(), v.check(isValidNamespace, "not a Kubernetes namespace")),
  netnsPath: v.string(),
  hostBridge: v.optional(v.string()),
  portMappings: v.array(PortMappingSchema),
  interfaces: v.array(InterfaceSchema),
});

export type PortMapping = v.InferOutput<typeof PortMappingSchema>;
export type ContainerInterface = v.InferOutput<typeof InterfaceSchema>;
export type SandboxCheckpoint = v.InferOutput<typeof SandboxCheckpointSchema>;

/** A checkpoint with no ports and no interfaces yet. */
export function newSandboxCheckpoint(
  namespace: string,
  name: string,
  netnsPath = "",
): SandboxCheckpoint {
  return {
    version: SANDBOX_CHECKPOINT_VERSION,
    name,
    namespace,
    netnsPath,
    portMappings: [],
    interfaces: [],
  };
}

/** The record payload: the checkpoint and the sandbox id it is stored under. */
export const SandboxRecordSchema = strictObject({
  sandboxId: v.pipe(
    v.string(),
    v.check(
      (id) => sandboxIdProblem(id) === undefined,
      (issue) => `invalid sandbox id: ${sandboxIdProblem(issue.input as string)}`,
    ),
  ),
  checkpoint: SandboxCheckpointSchema,
});

export type SandboxRecord = v.InferOutput<typeof SandboxRecordSchema>;

export const SANDBOX_RECORDS: RecordType<SandboxRecord> = {
  kind: "sandbox-checkpoint",
  dir: SANDBOX_DIR,
  schema: SandboxRecordSchema,
  fileNameOf: sandboxFileName,
  isFileName: isSandboxFileName,
  keyOfRecord: (record) => record.sandboxId,
};

export const SANDBOX_CODEC: StoreCodec<SandboxRecord> = {
  type: SANDBOX_RECORDS,
  toStored: (value) => value,
};
