/**
 * A simulated container runtime: a real gRPC server on a unix socket that speaks the same
 * embedded CRI schema as the client, and whose pods the caller sets. The demo node and the
 * end-to-end tests run the real agent against it; its verbose sandbox info is shaped like
 * containerd 1.6's, so the agent's parsing of that info is exercised too.
 */
import * as v from "valibot";
import { object, record } from "../core/schema.ts";
import {
  CRI_API_VERSIONS,
  type CriApiVersion,
  type CriMethod,
  criServices,
  type RuntimeMethod,
} from "../sources/cri_proto.ts";
import { GrpcStatus, unframe } from "../sources/grpc_unary.ts";
import {
  grpcAnswer,
  grpcError,
  type H2cServer,
  startH2cServer,
  type UnaryCall,
  untilClosed,
} from "./h2c_server.ts";
import { POD_NAME_LABEL, POD_NAMESPACE_LABEL, POD_UID_LABEL } from "../sources/cri.ts";

export type SimContainerState = "created" | "running" | "exited";

export interface SimContainer {
  name: string;
  state: SimContainerState;
  /** How many times the kubelet created this container in its sandbox before; default 0. */
  attempt?: number;
}

const CONTAINER_STATES: Record<SimContainerState, string> = {
  created: "CONTAINER_CREATED",
  running: "CONTAINER_RUNNING",
  exited: "CONTAINER_EXITED",
};

export interface SimPortMapping {
  protocol: "tcp" | "udp" | "sctp";
  containerPort: number;
  hostPort: number;
}

export interface SimInterface {
  name: string;
  /** As the CNI result gives them: a bare address ("10.88.0.5"), or with a prefix ("…/24"). */
  addresses: string[];
}

/** A pod network of its own; a pod without one is on the host network. */
export interface SimNetwork {
  netnsPath: string;
  /** Primary first. */
  ips: string[];
  interfaces: SimInterface[];
}

/** One sandbox of a pod, with its containers; a pod may have several (older ones not ready). */
export interface SimPod {
  namespace: string;
  name: string;
  uid: string;
  /** The sandbox state: READY or NOTREADY. */
  ready: boolean;
  /** Default: derived from the uid (and the attempt, when not 0). */
  sandboxId?: string;
  /** How many sandboxes the kubelet made for this pod before; default 0. */
  attempt?: number;
  containers?: SimContainer[];
  /** Replaces the io.kubernetes.pod.* labels the kubelet would set, e.g. to leave them out. */
  labels?: Record<string, string>;
  network?: SimNetwork;
  portMappings?: SimPortMapping[];
}

export interface CriSimOptions {
  socketPath: string;
  /** The CRI packages served; default both. An empty list serves nothing at all. */
  apiVersions?: readonly CriApiVersion[];
}

const PROTOCOL_NUMBERS: Record<SimPortMapping["protocol"], number> = { tcp: 0, udp: 1, sctp: 2 };

/** Creation times are fixed so that every listing is the same for the same pods. */
const CREATED_AT = 1_700_000_000_000_000_000n;

const FILTER_FIELDS = {
  id: v.string(),
  state: v.nullable(object({ state: v.string() })),
  label_selector: record(v.string()),
};
const Filter = v.nullable(object(FILTER_FIELDS));

const ListPodSandboxRequest = object({ filter: Filter });
const ListContainersRequest = object({
  filter: v.nullable(object({ ...FILTER_FIELDS, pod_sandbox_id: v.string() })),
});
const PodSandboxStatusRequest = object({ pod_sandbox_id: v.string(), verbose: v.boolean() });

type Handler = (request: unknown) => unknown;

/** What a handler returns to fail the call with a gRPC status. */
class RpcError {
  constructor(readonly code: number, readonly details: string) {}
}

interface ServedMethod {
  codec: CriMethod;
  handler: Handler;
}

export class CriSimServer {
  readonly endpoint: string;
  readonly #calls: string[] = [];
  #server: H2cServer | undefined;
  #pods: SimPod[] = [];
  #withholding = false;

  private constructor(socketPath: string) {
    this.endpoint = `unix://${socketPath}`;
  }

  /** Starts serving on `socketPath`, which must not exist yet. */
  static async start(options: CriSimOptions): Promise<CriSimServer> {
    const sim = new CriSimServer(options.socketPath);
    const served = new Map<string, ServedMethod>();
    for (const version of options.apiVersions ?? CRI_API_VERSIONS) {
      const handlers = sim.#handlers(version);
      for (const [method, codec] of Object.entries(criServices()[version])) {
        served.set(codec.path, { codec, handler: handlers[method as RuntimeMethod] });
      }
    }
    sim.#server = await startH2cServer(options.socketPath, (call) => sim.#serve(served, call));
    return sim;
  }

  setPods(pods: SimPod[]): void {
    this.#pods = structuredClone(pods);
  }

  /** The full method paths of the calls received, oldest first. */
  calls(): string[] {
    return [...this.#calls];
  }

  /** From now on, calls are accepted but never answered (until close). */
  withholdAnswers(): void {
    this.#withholding = true;
  }

  /** Stops answering: calls held back fail as unavailable, every connection gets a GOAWAY, and
   *  the socket disappears. */
  async close(): Promise<void> {
    await this.#server?.close();
  }

  async #serve(served: Map<string, ServedMethod>, call: UnaryCall): Promise<Response> {
    const method = served.get(call.path);
    if (!method) {
      // What grpc-go and grpc-js answer for a service or method they do not serve.
      return grpcError(GrpcStatus.UNIMPLEMENTED, `unknown method ${call.path}`);
    }
    this.#calls.push(call.path);
    if (this.#withholding) {
      await untilClosed(call);
      return grpcError(GrpcStatus.UNAVAILABLE, "the runtime is shutting down");
    }
    const request = unframe(call.body);
    if (!request.ok) return grpcError(request.code, request.details);
    let answer: unknown;
    try {
      answer = method.handler(method.codec.decodeRequest(request.message));
    } catch (error) {
      answer = new RpcError(GrpcStatus.INVALID_ARGUMENT, String(error));
    }
    return answer instanceof RpcError
      ? grpcError(answer.code, answer.details)
      : grpcAnswer(method.codec.encodeResponse(answer));
  }

  #handlers(version: CriApiVersion): Record<RuntimeMethod, Handler> {
    return {
      Version: () => ({
        version: "0.1.0",
        runtime_name: "ckpt-agent-sim",
        runtime_version: "1.0.0",
        runtime_api_version: version,
      }),
      ListPodSandbox: (request) => {
        const { filter } = v.parse(ListPodSandboxRequest, request);
        return {
          items: this.#sandboxes()
            .filter((sandbox) => matches(filter, sandbox.id, sandbox.state, sandbox.labels))
            .map(({ pod: _, ...sandbox }) => sandbox),
        };
      },
      ListContainers: (request) => {
        const { filter } = v.parse(ListContainersRequest, request);
        return {
          containers: this.#containers().filter((container) =>
            matches(filter, container.id, container.state, container.labels) &&
            (!filter?.pod_sandbox_id || filter.pod_sandbox_id === container.pod_sandbox_id)
          ),
        };
      },
      PodSandboxStatus: (request) => {
        const { pod_sandbox_id, verbose } = v.parse(PodSandboxStatusRequest, request);
        const sandbox = this.#sandboxes().find((sandbox) => sandbox.id === pod_sandbox_id);
        if (!sandbox) {
          return new RpcError(
            GrpcStatus.NOT_FOUND,
            `an error occurred when try to find sandbox: not found`,
          );
        }
        const { pod, ...status } = sandbox;
        const network = pod.network;
        return {
          status: {
            ...status,
            network: {
              ip: network?.ips[0] ?? "",
              additional_ips: (network?.ips.slice(1) ?? []).map((ip) => ({ ip })),
            },
          },
          info: verbose ? { info: JSON.stringify(containerdSandboxInfo(sandbox.id, pod)) } : {},
        };
      },
    };
  }

  #sandboxes() {
    return this.#pods.map((pod, index) => ({
      pod,
      id: sandboxId(pod),
      metadata: {
        name: pod.name,
        uid: pod.uid,
        namespace: pod.namespace,
        attempt: pod.attempt ?? 0,
      },
      state: pod.ready ? "SANDBOX_READY" : "SANDBOX_NOTREADY",
      created_at: String(CREATED_AT + BigInt(index)),
      labels: podLabels(pod),
      annotations: {},
      runtime_handler: "",
    }));
  }

  #containers() {
    return this.#pods.flatMap((pod, index) =>
      (pod.containers ?? []).map((container) => ({
        id: `${sandboxId(pod)}-${container.name}${
          container.attempt ? `-${container.attempt}` : ""
        }`,
        pod_sandbox_id: sandboxId(pod),
        metadata: { name: container.name, attempt: container.attempt ?? 0 },
        state: CONTAINER_STATES[container.state],
        created_at: String(CREATED_AT + BigInt(index)),
        labels: { ...podLabels(pod), "io.kubernetes.container.name": container.name },
        annotations: {},
      }))
    );
  }
}

function sandboxId(pod: SimPod): string {
  return pod.sandboxId ?? `sandbox-${pod.uid}${pod.attempt ? `-${pod.attempt}` : ""}`;
}

function podLabels(pod: SimPod): Record<string, string> {
  return pod.labels ?? {
    [POD_NAMESPACE_LABEL]: pod.namespace,
    [POD_NAME_LABEL]: pod.name,
    [POD_UID_LABEL]: pod.uid,
  };
}

/** The CRI filter rule: every field that is set must match. */
function matches(
  filter: v.InferOutput<typeof Filter>,
  id: string,
  state: string,
  labels: Record<string, string>,
): boolean {
  if (!filter) return true;
  if (filter.id && filter.id !== id) return false;
  if (filter.state && filter.state.state !== state) return false;
  return Object.entries(filter.label_selector).every(([key, value]) => labels[key] === value);
}

/**
 * The JSON containerd 1.6 puts under info["info"] (pkg/cri/server/sandbox_status.go,
 * SandboxInfo): Go's encoding/json of its structs, so the CRI config has snake_case keys, enums
 * as numbers and zero values left out, and go-cni's Result has Go field names.
 */
function containerdSandboxInfo(id: string, pod: SimPod) {
  const network = pod.network;
  const namespaces = [
    { type: "pid" },
    { type: "ipc" },
    { type: "uts" },
    { type: "mount" },
    ...(network ? [{ type: "network", path: network.netnsPath }] : []),
  ];
  return {
    pid: 4242,
    processStatus: pod.ready ? "running" : "stopped",
    netNamespaceClosed: false,
    image: "registry.k8s.io/pause:3.6",
    snapshotKey: id,
    snapshotter: "overlayfs",
    runtimeHandler: "",
    runtimeType: "io.containerd.runc.v2",
    runtimeOptions: { systemd_cgroup: true },
    config: {
      metadata: { name: pod.name, uid: pod.uid, namespace: pod.namespace },
      log_directory: `/var/log/pods/${pod.namespace}_${pod.name}_${pod.uid}`,
      port_mappings: (pod.portMappings ?? []).map((mapping) =>
        withoutZeros({
          protocol: PROTOCOL_NUMBERS[mapping.protocol],
          container_port: mapping.containerPort,
          host_port: mapping.hostPort,
        })
      ),
      labels: podLabels(pod),
      linux: {
        security_context: { namespace_options: withoutZeros({ network: network ? 0 : 2, pid: 1 }) },
      },
    },
    runtimeSpec: { ociVersion: "1.0.2-dev", linux: { namespaces } },
    cniResult: network ? cniResult(network) : null,
  };
}

function cniResult(network: SimNetwork) {
  const ipConfigs = (addresses: string[]) =>
    addresses.length === 0 ? null : addresses.map((IP) => ({ IP, Gateway: "" }));
  const interfaces = [
    { name: "lo", addresses: ["127.0.0.1", "::1"], mac: "00:00:00:00:00:00" },
    ...network.interfaces.map((i) => ({ ...i, mac: "0a:58:0a:58:00:05" })),
  ];
  return {
    // Go marshals maps with their keys sorted.
    Interfaces: Object.fromEntries(
      interfaces
        .sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
        .map((i) => [
          i.name,
          { IPConfigs: ipConfigs(i.addresses), Mac: i.mac, Sandbox: network.netnsPath },
        ]),
    ),
    DNS: [{}],
    Routes: null,
  };
}

/** Go's `omitempty`: zero numbers are left out. */
function withoutZeros(fields: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== 0));
}
