/**
 * The container runtime as the agent sees it: which pods run on this node, and the network
 * details of a pod sandbox. Speaks CRI over the runtime's unix socket, runtime.v1 first and
 * runtime.v1alpha2 only when the runtime does not implement v1 (docs/design.md#running). Every
 * failure comes back as a SourceFailure with source "runtime"; nothing is thrown and nothing is
 * printed.
 */
import { isIP } from "node:net";
import * as v from "valibot";
import { check, int, number, object, record, type Schema } from "../core/schema.ts";
import { schemaProblem } from "../core/schema_error.ts";
import {
  CRI_API_VERSIONS,
  type CriApiVersion,
  type CriMethod,
  criServices,
  type RuntimeMethod,
} from "./cri_proto.ts";
import { AnswerMemo } from "./answer_memo.ts";
import { deepFreeze } from "../util/frozen.ts";
import { GrpcStatus, grpcStatusName, GrpcUnaryClient } from "./grpc_unary.ts";
import { failed, type FailureKind, type SourceResult, succeeded } from "./types.ts";

export interface RunningPod {
  namespace: string;
  name: string;
  uid: string;
  sandboxIds: string[];
  /**
   * How many times the kubelet restarted a container of it: the highest attempt among the
   * containers that make it count (lib/pass/crash_loops.ts).
   */
  restarts: number;
  /** Whether a container of it runs now (CONTAINER_RUNNING), rather than only having started. */
  containerRunning: boolean;
}

export interface PortMapping {
  protocol: "tcp" | "udp" | "sctp";
  containerPort: number;
  hostPort: number;
}

export interface SandboxInterface {
  name: string;
  /** CIDR form, v4 or v6. */
  address: string;
}

export interface SandboxDetails {
  id: string;
  namespace: string;
  name: string;
  uid: string;
  /** "" when the runtime does not say (host network, or no verbose info). */
  netnsPath: string;
  /** Primary first, then additional. */
  ips: string[];
  interfaces: SandboxInterface[];
  portMappings: PortMapping[];
}

export interface RuntimeClient {
  /** Pods the kubelet has shown it can start: see runningPods. */
  listRunningPods(): Promise<SourceResult<RunningPod[]>>;
  sandboxStatus(sandboxId: string): Promise<SourceResult<SandboxDetails>>;
  close(): void;
}

export const POD_NAMESPACE_LABEL = "io.kubernetes.pod.namespace";
export const POD_NAME_LABEL = "io.kubernetes.pod.name";
export const POD_UID_LABEL = "io.kubernetes.pod.uid";

/** The CRI API version the kubelet announces in its Version request. */
const KUBELET_CRI_VERSION = "0.1.0";

/** `endpoint` is `unix:///path/to.sock` or a bare absolute path; `timeoutMs` bounds every call. */
export function connectRuntime(endpoint: string, timeoutMs: number): RuntimeClient {
  const socketPath = runtimeSocketPath(endpoint);
  if (socketPath === undefined) {
    const failure = failed<never>(
      "runtime",
      "unreachable",
      `${endpoint}: not a unix socket endpoint (unix:///path or an absolute path)`,
    );
    return {
      listRunningPods: () => Promise.resolve(failure),
      sandboxStatus: () => Promise.resolve(failure),
      close: () => {},
    };
  }
  return new CriRuntimeClient(endpoint, socketPath, timeoutMs);
}

/** The socket path of a runtime endpoint, or undefined when it is not a unix socket. */
export function runtimeSocketPath(endpoint: string): string | undefined {
  if (endpoint.startsWith("/")) return endpoint;
  if (endpoint.startsWith("unix:///")) return endpoint.slice("unix://".length);
  return undefined;
}

const Labels = record(v.string());
/** Enums decode to their names; a value this schema does not know decodes to its number. */
const EnumValue = v.union([v.string(), number()]);

const VersionResponse = object({ runtime_api_version: v.string() });

const ListPodSandboxResponse = object({
  items: v.array(object({ id: v.string(), state: EnumValue })),
});

const ListContainersResponse = object({
  containers: v.array(
    object({
      id: v.string(),
      pod_sandbox_id: v.string(),
      metadata: v.nullish(object({ attempt: v.optional(v.number(), 0) })),
      state: EnumValue,
      labels: Labels,
    }),
  ),
});

const PodSandboxStatusResponse = object({
  status: object({
    id: v.string(),
    metadata: object({ name: v.string(), uid: v.string(), namespace: v.string() }),
    network: v.nullable(
      object({ ip: v.string(), additional_ips: v.array(object({ ip: v.string() })) }),
    ),
  }),
  info: Labels,
});

type RpcError = { code: number; details: string };

type RpcOutcome = { ok: true; value: unknown } | { ok: false; error: RpcError };

function decoded(codec: CriMethod, message: Uint8Array): RpcOutcome {
  try {
    return { ok: true, value: codec.decodeResponse(message) };
  } catch (error) {
    return {
      ok: false,
      error: { code: GrpcStatus.INTERNAL, details: `undecodable answer: ${error}` },
    };
  }
}

class CriRuntimeClient implements RuntimeClient {
  readonly #endpoint: string;
  readonly #socketPath: string;
  readonly #timeoutMs: number;
  #connection: GrpcUnaryClient | undefined;
  #api: CriApiVersion | undefined;
  /** Each method's last valid answer, by the path it is called at (which names the version). */
  readonly #memos = new Map<string, AnswerMemo<unknown>>();
  /**
   * The pods the last two answers made: the same answers (the memos' values, by identity) make
   * the same array, frozen whole, so that a pass can tell an unchanged runtime by identity.
   */
  #running?: { sandboxes: unknown; containers: unknown; pods: RunningPod[] };

  constructor(endpoint: string, socketPath: string, timeoutMs: number) {
    this.#endpoint = endpoint;
    this.#socketPath = socketPath;
    this.#timeoutMs = timeoutMs;
  }

  async listRunningPods(): Promise<SourceResult<RunningPod[]>> {
    const api = await this.#negotiate();
    if (!api.ok) return api;
    const [sandboxes, containers] = await Promise.all([
      this.#ask(api.value, "ListPodSandbox", {
        filter: { state: { state: "SANDBOX_READY" } },
      }, ListPodSandboxResponse),
      // Every state: a created or exited container counts too (see runningPods).
      this.#ask(api.value, "ListContainers", {}, ListContainersResponse),
    ]);
    if (!sandboxes.ok) return sandboxes;
    if (!containers.ok) return containers;
    const last = this.#running;
    if (last?.sandboxes === sandboxes.value && last.containers === containers.value) {
      return succeeded(last.pods);
    }
    // The filter already asked for this; checking again keeps a runtime that ignores filters
    // from passing a stopped sandbox off as ready.
    const ready = sandboxes.value.items.filter((sandbox) => sandbox.state === SANDBOX_READY);
    const pods = deepFreeze(runningPods(
      new Set(ready.map((sandbox) => sandbox.id)),
      containers.value.containers.map((container) => ({
        sandboxId: container.pod_sandbox_id,
        state: container.state,
        attempt: container.metadata?.attempt ?? 0,
        labels: container.labels,
      })),
    ));
    this.#running = { sandboxes: sandboxes.value, containers: containers.value, pods };
    return succeeded(pods);
  }

  async sandboxStatus(sandboxId: string): Promise<SourceResult<SandboxDetails>> {
    const api = await this.#negotiate();
    if (!api.ok) return api;
    const answer = await this.#ask(
      api.value,
      "PodSandboxStatus",
      { pod_sandbox_id: sandboxId, verbose: true },
      PodSandboxStatusResponse,
    );
    if (!answer.ok) return answer;
    const { status, info } = answer.value;
    const network = status.network;
    return succeeded({
      id: status.id,
      namespace: status.metadata.namespace,
      name: status.metadata.name,
      uid: status.metadata.uid,
      ips: [network?.ip ?? "", ...(network?.additional_ips ?? []).map((ip) => ip.ip)]
        .filter((ip) => ip !== ""),
      ...parseSandboxInfo(info["info"]),
    });
  }

  close(): void {
    this.#connection?.close();
    this.#connection = undefined;
  }

  /** The API version to speak: probed with Version once, then remembered. */
  async #negotiate(): Promise<SourceResult<CriApiVersion>> {
    if (this.#api) return succeeded(this.#api);
    for (const version of CRI_API_VERSIONS) {
      const outcome = await this.#rpc(version, "Version", { version: KUBELET_CRI_VERSION });
      if (!outcome.ok) {
        if (outcome.error.code === GrpcStatus.UNIMPLEMENTED) continue;
        return this.#failure(version, "Version", outcome.error);
      }
      const answer = this.#check(version, "Version", outcome.value, VersionResponse);
      if (!answer.ok) return answer;
      this.#api = version;
      return succeeded(version);
    }
    return failed(
      "runtime",
      "bad-response",
      `${this.#endpoint}: the runtime implements neither runtime.v1 nor runtime.v1alpha2`,
    );
  }

  async #ask<T>(
    version: CriApiVersion,
    method: RuntimeMethod,
    request: unknown,
    schema: Schema<T>,
  ): Promise<SourceResult<T>> {
    const codec = criServices()[version][method];
    const exchanged = await this.#exchange(codec.path, codec.encodeRequest(request));
    if (exchanged.ok) {
      const memo = this.#memos.get(codec.path) ?? new AnswerMemo<unknown>();
      this.#memos.set(codec.path, memo);
      const decodeAndCheck = () => {
        const outcome = decoded(codec, exchanged.message);
        return outcome.ok
          ? this.#check(version, method, outcome.value, schema)
          : this.#failure<T>(version, method, outcome.error);
      };
      return memo.answer(exchanged.message, decodeAndCheck) as SourceResult<T>;
    }
    // A runtime replaced by one that speaks another version: probe again on the next call.
    if (exchanged.code === GrpcStatus.UNIMPLEMENTED) this.#api = undefined;
    return this.#failure(version, method, exchanged);
  }

  #check<T>(
    version: CriApiVersion,
    method: RuntimeMethod,
    value: unknown,
    schema: Schema<T>,
  ): SourceResult<T> {
    const parsed = check(schema, value);
    if (parsed.success) return succeeded(parsed.output);
    const { path, message } = schemaProblem(schema, parsed.issues);
    return failed(
      "runtime",
      "bad-response",
      `${this.#describe(version, method)}: unexpected answer at ${
        path.join(".") || "(root)"
      }: ${message}`,
    );
  }

  #failure<T>(
    version: CriApiVersion,
    method: RuntimeMethod,
    error: RpcError,
  ): SourceResult<T> {
    const kind = failureKind(error.code);
    const details = error.details.replace(/\s+/g, " ").trim();
    return failed(
      "runtime",
      kind,
      `${this.#describe(version, method)}: ${grpcStatusName(error.code)}: ${details}`,
    );
  }

  #describe(version: CriApiVersion, method: RuntimeMethod): string {
    return `${this.#endpoint} runtime.${version}.RuntimeService/${method}`;
  }

  async #rpc(version: CriApiVersion, method: RuntimeMethod, request: unknown): Promise<RpcOutcome> {
    const codec = criServices()[version][method];
    const outcome = await this.#exchange(codec.path, codec.encodeRequest(request));
    return outcome.ok ? decoded(codec, outcome.message) : { ok: false, error: outcome };
  }

  /** One call, its answer undecoded. */
  async #exchange(path: string, body: Uint8Array) {
    const reused = this.#connection !== undefined;
    const outcome = await this.#call(path, body);
    // A runtime restarted since the last call leaves a dead connection behind. Every CRI call we
    // make only reads, so it is asked once more on a fresh connection, as gRPC clients
    // transparently retry calls the server never saw.
    if (!outcome.ok && outcome.code === GrpcStatus.UNAVAILABLE && reused) {
      return await this.#call(path, body);
    }
    return outcome;
  }

  /** One call on the current connection, which is dropped when it turns out to be dead. */
  async #call(path: string, body: Uint8Array) {
    const connection = this.#connection ??= new GrpcUnaryClient(this.#socketPath);
    const outcome = await connection.call(path, body, this.#timeoutMs);
    // Calls running side by side may both see it die: only the first drops it.
    if (!outcome.ok && outcome.code === GrpcStatus.UNAVAILABLE && this.#connection === connection) {
      this.close();
    }
    return outcome;
  }
}

function failureKind(code: number): FailureKind {
  switch (code) {
    case GrpcStatus.UNAVAILABLE:
      return "unreachable";
    case GrpcStatus.DEADLINE_EXCEEDED:
      return "timeout";
    case GrpcStatus.NOT_FOUND:
      return "not-found";
    case GrpcStatus.UNAUTHENTICATED:
      return "unauthorized";
    case GrpcStatus.PERMISSION_DENIED:
      return "forbidden";
    case GrpcStatus.UNKNOWN:
    case GrpcStatus.INTERNAL:
    case GrpcStatus.RESOURCE_EXHAUSTED:
    case GrpcStatus.ABORTED:
    case GrpcStatus.CANCELLED:
    case GrpcStatus.DATA_LOSS:
      return "server-error";
    default:
      return "bad-response";
  }
}

/** State names as both runtime.v1 and runtime.v1alpha2 decode them. */
const SANDBOX_READY = "SANDBOX_READY";
const CONTAINER_RUNNING = "CONTAINER_RUNNING";
const CONTAINER_CREATED = "CONTAINER_CREATED";
const CONTAINER_EXITED = "CONTAINER_EXITED";

export interface ContainerEntry {
  sandboxId: string;
  /** The state's name; an unknown state decodes to its number. */
  state: string | number;
  /** The kubelet's restart count of this container when it made it (metadata.attempt). */
  attempt: number;
  labels: Record<string, string>;
}

/**
 * The pods that run, as the hand-back needs it: a pod counts once the kubelet has shown it can
 * start it, that is when it has a RUNNING container (in any sandbox), or a CREATED or EXITED
 * container in a READY sandbox. A ready sandbox alone does not count: the kubelet may keep a
 * pod's containers from starting for many seconds after (CreateContainerConfigError), and a
 * copy withdrawn then leaves neither running. An exited container does not count outside a
 * ready sandbox: after a power cut the runtime still lists the old sandboxes, NOTREADY, with
 * their EXITED containers, and counting those would keep every checkpoint from activating.
 * CONTAINER_UNKNOWN never counts. Pods are named by the io.kubernetes.pod.namespace / name / uid
 * labels the kubelet puts on every container; a container without them is ignored. A pod's
 * sandbox ids are those of its containers that count.
 */
export function runningPods(
  readySandboxIds: ReadonlySet<string>,
  containers: readonly ContainerEntry[],
): RunningPod[] {
  const pods = new Map<string, RunningPod>();
  for (const { sandboxId, state, attempt, labels } of containers) {
    const started = state === CONTAINER_CREATED || state === CONTAINER_EXITED;
    if (state !== CONTAINER_RUNNING && !(started && readySandboxIds.has(sandboxId))) continue;
    const namespace = labels[POD_NAMESPACE_LABEL];
    const name = labels[POD_NAME_LABEL];
    const uid = labels[POD_UID_LABEL];
    if (!namespace || !name || !uid) continue;
    const key = JSON.stringify([namespace, name, uid]);
    const pod = pods.get(key) ??
      { namespace, name, uid, sandboxIds: [], restarts: 0, containerRunning: false };
    pods.set(key, pod);
    pod.restarts = Math.max(pod.restarts, attempt);
    pod.containerRunning ||= state === CONTAINER_RUNNING;
    if (sandboxId !== "" && !pod.sandboxIds.includes(sandboxId)) pod.sandboxIds.push(sandboxId);
  }
  return [...pods.values()].sort((a, b) =>
    compare(a.namespace, b.namespace) || compare(a.name, b.name) || compare(a.uid, b.uid)
  );
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

// The verbose "info" entry of containerd's PodSandboxStatus (pkg/cri/server/sandbox_status.go,
// SandboxInfo): the runtime spec, the sandbox config (Go's encoding/json of the CRI struct, so
// snake_case keys, enums as numbers and zero values omitted) and go-cni's Result. It is
// debugging output, not API: each part is read on its own and anything unexpected reads as
// absent.

const RuntimeSpecPart = object({
  runtimeSpec: object({
    linux: object({
      namespaces: v.array(object({ type: v.string(), path: v.optional(v.string()) })),
    }),
  }),
});

const PROTOCOLS: Record<string, PortMapping["protocol"]> = {
  "0": "tcp",
  "1": "udp",
  "2": "sctp",
  TCP: "tcp",
  UDP: "udp",
  SCTP: "sctp",
};

const Port = v.optional(v.pipe(int(), v.minValue(0), v.maxValue(65535)), 0);

const ConfigPart = object({
  config: object({
    port_mappings: v.array(object({
      // Absent means 0, which is TCP.
      protocol: v.optional(v.union([number(), v.string()]), 0),
      container_port: Port,
      host_port: Port,
    })),
  }),
});

const CniResultPart = object({
  cniResult: object({
    Interfaces: record(
      v.nullable(object({ IPConfigs: v.nullish(v.array(object({ IP: v.string() }))) })),
    ),
  }),
});

export type SandboxInfo = Pick<SandboxDetails, "netnsPath" | "interfaces" | "portMappings">;

/** What the verbose info of a sandbox says about its network; absent parts give empty values. */
export function parseSandboxInfo(info: string | undefined): SandboxInfo {
  let json: unknown;
  try {
    json = JSON.parse(info ?? "null");
  } catch {
    json = null;
  }
  return { netnsPath: netnsPath(json), interfaces: interfaces(json), portMappings: ports(json) };
}

function netnsPath(json: unknown): string {
  const spec = check(RuntimeSpecPart, json);
  if (!spec.success) return "";
  return spec.output.runtimeSpec.linux.namespaces.find((ns) => ns.type === "network")?.path ?? "";
}

function ports(json: unknown): PortMapping[] {
  const config = check(ConfigPart, json);
  if (!config.success) return [];
  return config.output.config.port_mappings.flatMap((mapping) => {
    const protocol = PROTOCOLS[String(mapping.protocol).toUpperCase()];
    return protocol
      ? [{ protocol, containerPort: mapping.container_port, hostPort: mapping.host_port }]
      : [];
  });
}

function interfaces(json: unknown): SandboxInterface[] {
  const cni = check(CniResultPart, json);
  if (!cni.success) return [];
  return Object.entries(cni.output.cniResult.Interfaces).flatMap(([name, config]) =>
    (config?.IPConfigs ?? []).flatMap(({ IP }) => {
      const address = cidr(IP);
      return address ? [{ name, address }] : [];
    })
  );
}

/**
 * An address in CIDR form: the prefix the runtime gave, else a host prefix. Loopback addresses
 * (the CNI loopback plugin reports lo's) say nothing about how the pod is reached, so they and
 * anything that is not an address give undefined.
 */
function cidr(address: string): string | undefined {
  const [ip, prefix, ...rest] = address.split("/");
  const family = isIP(ip);
  if (family === 0 || rest.length > 0) return undefined;
  if (ip.startsWith("127.") || ip === "::1") return undefined;
  const hostPrefix = family === 4 ? 32 : 128;
  if (prefix === undefined) return `${ip}/${hostPrefix}`;
  if (!/^\d{1,3}$/.test(prefix) || Number(prefix) > hostPrefix) return undefined;
  return `${ip}/${Number(prefix)}`;
}
