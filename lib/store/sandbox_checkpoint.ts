/**
 * A pod sandbox checkpoint: the network facts of a sandbox that ran an activated checkpoint, as the
 * container runtime reported them.
 */
import { z } from "zod";
import { isValidNamespace, isValidObjectName } from "../core/ids.ts";
import { SANDBOX_DIR, sandboxFileName, sandboxIdOfFileName, sandboxIdProblem } from "./layout.ts";
import type { RecordType } from "./record_files.ts";
import type { StoreCodec } from "./record_store.ts";

/**
 * The version of the checkpoint's own shape (its `version` field), apart from the version of the
 * record envelope it is stored in.
 */
export const SANDBOX_CHECKPOINT_VERSION = "v1";

const Port = z.int().min(1).max(65535);

export const PortMappingSchema = z.object({
  protocol: z.enum(["tcp", "udp", "sctp"]),
  containerPort: Port,
  /** 0 when the port is not published on the host, as in CRI. */
  hostPort: z.int().min(0).max(65535),
}).strict();

export const InterfaceSchema = z.object({
  name: z.string().min(1),
  /** The interface's address with its prefix length, e.g. `10.244.0.5/24` or `fd00::5/64`. */
  address: z.union([z.cidrv4(), z.cidrv6()], { error: "not an IPv4 or IPv6 address in CIDR form" }),
}).strict();

export const SandboxCheckpointSchema = z.object({
  version: z.literal(SANDBOX_CHECKPOINT_VERSION),
  name: z.string().refine(isValidObjectName, { error: "not a Kubernetes object name" }),
  namespace: z.string().refine(isValidNamespace, { error: "not a Kubernetes namespace" }),
  netnsPath: z.string(),
  hostBridge: z.string().optional(),
  portMappings: z.array(PortMappingSchema),
  interfaces: z.array(InterfaceSchema),
}).strict();

export type PortMapping = z.infer<typeof PortMappingSchema>;
export type ContainerInterface = z.infer<typeof InterfaceSchema>;
export type SandboxCheckpoint = z.infer<typeof SandboxCheckpointSchema>;

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
export const SandboxRecordSchema = z.object({
  sandboxId: z.string().refine((id) => sandboxIdProblem(id) === undefined, {
    error: (issue) => `invalid sandbox id: ${sandboxIdProblem(issue.input as string)}`,
  }),
  checkpoint: SandboxCheckpointSchema,
}).strict();

export type SandboxRecord = z.infer<typeof SandboxRecordSchema>;

export const SANDBOX_RECORDS: RecordType<SandboxRecord> = {
  kind: "sandbox-checkpoint",
  dir: SANDBOX_DIR,
  schema: SandboxRecordSchema,
  fileNameOf: sandboxFileName,
  keyOfFileName: sandboxIdOfFileName,
  keyOfRecord: (record) => record.sandboxId,
};

export const SANDBOX_CODEC: StoreCodec<SandboxRecord> = {
  type: SANDBOX_RECORDS,
  toStored: (value) => value,
};
