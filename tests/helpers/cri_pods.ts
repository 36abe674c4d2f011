/**
 * The kubelet's side of the CRI, for tests against a real containerd: run and stop pod
 * sandboxes (on the host network, as control-plane pods run), create, start and stop their
 * containers. The agent never calls these methods, so their messages are declared here, with
 * the field numbers of k8s.io/cri-api's runtime.v1 api.proto, and only the fields used.
 */
import protobuf from "protobufjs";
import {
  POD_NAME_LABEL,
  POD_NAMESPACE_LABEL,
  POD_UID_LABEL,
  runtimeSocketPath,
} from "../../lib/sources/cri.ts";
import { grpcStatusName, GrpcUnaryClient } from "../../lib/sources/grpc_unary.ts";
import { criCall } from "../sources/cri_call.ts";
import { TEST_IMAGE } from "./containerd.ts";

const KUBELET_MESSAGES = `
syntax = "proto3";
package runtime.v1;
message PodSandboxMetadata { string name = 1; string uid = 2; string namespace = 3; uint32 attempt = 4; }
enum NamespaceMode { POD = 0; CONTAINER = 1; NODE = 2; TARGET = 3; }
message NamespaceOption { NamespaceMode network = 1; NamespaceMode pid = 2; NamespaceMode ipc = 3; }
message LinuxSandboxSecurityContext { NamespaceOption namespace_options = 1; }
message LinuxPodSandboxConfig { string cgroup_parent = 1; LinuxSandboxSecurityContext security_context = 2; }
message PodSandboxConfig {
  PodSandboxMetadata metadata = 1;
  string hostname = 2;
  string log_directory = 3;
  map<string, string> labels = 6;
  LinuxPodSandboxConfig linux = 8;
}
message RunPodSandboxRequest { PodSandboxConfig config = 1; string runtime_handler = 2; }
message RunPodSandboxResponse { string pod_sandbox_id = 1; }
message PodSandboxIdRequest { string pod_sandbox_id = 1; }
message ContainerMetadata { string name = 1; uint32 attempt = 2; }
message ImageSpec { string image = 1; }
message ContainerConfig {
  ContainerMetadata metadata = 1;
  ImageSpec image = 2;
  repeated string command = 3;
  map<string, string> labels = 9;
  string log_path = 11;
}
message CreateContainerRequest {
  string pod_sandbox_id = 1;
  ContainerConfig config = 2;
  PodSandboxConfig sandbox_config = 3;
}
message CreateContainerResponse { string container_id = 1; }
message StopContainerRequest { string container_id = 1; int64 timeout = 2; }
message ContainerIdRequest { string container_id = 1; }
message Empty {}
`;

const METHODS = {
  RunPodSandbox: ["RunPodSandboxRequest", "RunPodSandboxResponse"],
  StopPodSandbox: ["PodSandboxIdRequest", "Empty"],
  RemovePodSandbox: ["PodSandboxIdRequest", "Empty"],
  CreateContainer: ["CreateContainerRequest", "CreateContainerResponse"],
  StartContainer: ["ContainerIdRequest", "Empty"],
  StopContainer: ["StopContainerRequest", "Empty"],
} as const;

type KubeletMethod = keyof typeof METHODS;

export interface PodRef {
  namespace: string;
  name: string;
  uid: string;
}

/** How NamespaceMode NODE reads: the host's network namespace. */
const NODE = 2;

export class CriPods {
  readonly #endpoint: string;
  readonly #logDir: string;
  readonly #root = protobuf.parse(KUBELET_MESSAGES, { keepCase: true }).root;
  readonly #client: GrpcUnaryClient;
  readonly #configs = new Map<string, unknown>();

  constructor(endpoint: string, logDir: string) {
    this.#endpoint = endpoint;
    this.#logDir = logDir;
    this.#client = new GrpcUnaryClient(runtimeSocketPath(endpoint)!);
  }

  async #call(method: KubeletMethod, request: unknown): Promise<Record<string, unknown>> {
    const [requestType, responseType] = METHODS[method].map((t) =>
      this.#root.lookupType(`runtime.v1.${t}`)
    );
    const body = requestType.encode(requestType.fromObject(request as Record<string, unknown>));
    // Starting a sandbox or a container takes runc a moment; stopping one waits for it to exit.
    const outcome = await this.#client.call(
      `/runtime.v1.RuntimeService/${method}`,
      body.finish(),
      30_000,
    );
    if (!outcome.ok) {
      throw new Error(`${method}: ${grpcStatusName(outcome.code)}: ${outcome.details}`);
    }
    return responseType.toObject(responseType.decode(outcome.message));
  }

  /** A ready sandbox for the pod, on the host network; returns its id. */
  async runSandbox(pod: PodRef, attempt = 0): Promise<string> {
    const config = {
      metadata: { ...pod, attempt },
      log_directory: `${this.#logDir}/${pod.namespace}_${pod.name}_${pod.uid}`,
      labels: labelsOf(pod),
      linux: { security_context: { namespace_options: { network: NODE } } },
    };
    const { pod_sandbox_id } = await this.#call("RunPodSandbox", { config });
    this.#configs.set(String(pod_sandbox_id), config);
    return String(pod_sandbox_id);
  }

  /** A container of the pod in its sandbox, CREATED and not started; returns its id. */
  async createContainer(sandboxId: string, pod: PodRef, name: string, attempt = 0) {
    const { container_id } = await this.#call("CreateContainer", {
      pod_sandbox_id: sandboxId,
      config: {
        metadata: { name, attempt },
        image: { image: TEST_IMAGE },
        labels: { ...labelsOf(pod), "io.kubernetes.container.name": name },
        log_path: `${name}/${attempt}.log`,
      },
      sandbox_config: this.#configs.get(sandboxId),
    });
    return String(container_id);
  }

  async startContainer(containerId: string) {
    await this.#call("StartContainer", { container_id: containerId });
  }

  async stopContainer(containerId: string) {
    await this.#call("StopContainer", { container_id: containerId, timeout: 0 });
  }

  /** What a power cut leaves: the sandbox NOTREADY, its containers EXITED. */
  async stopSandbox(sandboxId: string) {
    await this.#call("StopPodSandbox", { pod_sandbox_id: sandboxId });
  }

  /** Stops and removes every sandbox, so that no shim outlives the test's containerd. */
  async removeAll() {
    const { items } = await criCall(this.#endpoint, "v1", "ListPodSandbox", {}) as {
      items: { id: string }[];
    };
    for (const { id } of items) {
      await this.#call("StopPodSandbox", { pod_sandbox_id: id });
      await this.#call("RemovePodSandbox", { pod_sandbox_id: id });
    }
  }

  close() {
    this.#client.close();
  }
}

function labelsOf(pod: PodRef): Record<string, string> {
  return {
    [POD_NAMESPACE_LABEL]: pod.namespace,
    [POD_NAME_LABEL]: pod.name,
    [POD_UID_LABEL]: pod.uid,
  };
}
