/**
 * The slice of the Kubernetes CRI that ckpt-agent speaks: method paths and message codecs shared
 * by the client (lib/sources/cri.ts) and the simulated runtime (lib/sim/cri_server.ts).
 *
 * The schema is embedded text, not a file: the compiled binary must not read the source tree.
 * Field numbers are those of k8s.io/cri-api, pkg/apis/runtime/v1/api.proto (package runtime.v1)
 * and pkg/apis/runtime/v1alpha2/api.proto (package runtime.v1alpha2); the two agree on every
 * number used here. Only the fields we read or send are declared: proto3 decoders skip the rest,
 * so a runtime that sends more (images, container statuses, timestamps) still decodes.
 */
import protobuf from "protobufjs";

export type CriApiVersion = "v1" | "v1alpha2";

/** The newest first: the order in which the client probes. */
export const CRI_API_VERSIONS: readonly CriApiVersion[] = ["v1", "v1alpha2"];

const CRI_MESSAGES = `
service RuntimeService {
  rpc Version(VersionRequest) returns (VersionResponse) {}
  rpc PodSandboxStatus(PodSandboxStatusRequest) returns (PodSandboxStatusResponse) {}
  rpc ListPodSandbox(ListPodSandboxRequest) returns (ListPodSandboxResponse) {}
  rpc ListContainers(ListContainersRequest) returns (ListContainersResponse) {}
}

message VersionRequest {
  string version = 1;
}

message VersionResponse {
  string version = 1;
  string runtime_name = 2;
  string runtime_version = 3;
  string runtime_api_version = 4;
}

message PodSandboxMetadata {
  string name = 1;
  string uid = 2;
  string namespace = 3;
  uint32 attempt = 4;
}

enum PodSandboxState {
  SANDBOX_READY = 0;
  SANDBOX_NOTREADY = 1;
}

message PodSandboxStateValue {
  PodSandboxState state = 1;
}

message PodSandboxFilter {
  string id = 1;
  PodSandboxStateValue state = 2;
  map<string, string> label_selector = 3;
}

message ListPodSandboxRequest {
  PodSandboxFilter filter = 1;
}

message PodSandbox {
  string id = 1;
  PodSandboxMetadata metadata = 2;
  PodSandboxState state = 3;
  int64 created_at = 4;
  map<string, string> labels = 5;
  map<string, string> annotations = 6;
  string runtime_handler = 7;
}

message ListPodSandboxResponse {
  repeated PodSandbox items = 1;
}

message PodSandboxStatusRequest {
  string pod_sandbox_id = 1;
  bool verbose = 2;
}

message PodIP {
  string ip = 1;
}

message PodSandboxNetworkStatus {
  string ip = 1;
  repeated PodIP additional_ips = 2;
}

message PodSandboxStatus {
  string id = 1;
  PodSandboxMetadata metadata = 2;
  PodSandboxState state = 3;
  int64 created_at = 4;
  PodSandboxNetworkStatus network = 5;
  map<string, string> labels = 7;
  map<string, string> annotations = 8;
  string runtime_handler = 9;
}

message PodSandboxStatusResponse {
  PodSandboxStatus status = 1;
  map<string, string> info = 2;
}

enum ContainerState {
  CONTAINER_CREATED = 0;
  CONTAINER_RUNNING = 1;
  CONTAINER_EXITED = 2;
  CONTAINER_UNKNOWN = 3;
}

message ContainerStateValue {
  ContainerState state = 1;
}

message ContainerFilter {
  string id = 1;
  ContainerStateValue state = 2;
  string pod_sandbox_id = 3;
  map<string, string> label_selector = 4;
}

message ListContainersRequest {
  ContainerFilter filter = 1;
}

message ContainerMetadata {
  string name = 1;
  uint32 attempt = 2;
}

message Container {
  string id = 1;
  string pod_sandbox_id = 2;
  ContainerMetadata metadata = 3;
  ContainerState state = 6;
  int64 created_at = 7;
  map<string, string> labels = 8;
  map<string, string> annotations = 9;
}

message ListContainersResponse {
  repeated Container containers = 1;
}
`;

/** The embedded .proto text of one CRI package. */
export function criProtoText(version: CriApiVersion): string {
  return `syntax = "proto3";\npackage runtime.${version};\n${CRI_MESSAGES}`;
}

/**
 * How decoded messages look in JavaScript, for both the client and the simulated server
 * (field names stay as in the schema: the text is parsed with keepCase).
 */
const CONVERSION: protobuf.IConversionOptions = {
  enums: String,
  longs: String,
  defaults: true,
  arrays: true,
  objects: true,
};

export type RuntimeMethod = "Version" | "PodSandboxStatus" | "ListPodSandbox" | "ListContainers";

/** One unary method: its HTTP/2 path and how each side's message is written and read. */
export interface CriMethod {
  path: string;
  encodeRequest(value: unknown): Uint8Array;
  decodeRequest(bytes: Uint8Array): unknown;
  encodeResponse(value: unknown): Uint8Array;
  decodeResponse(bytes: Uint8Array): unknown;
}

export type CriService = Record<RuntimeMethod, CriMethod>;

let services: Record<CriApiVersion, CriService> | undefined;

/** The RuntimeService of each CRI package, built once from the embedded text. */
export function criServices(): Record<CriApiVersion, CriService> {
  if (!services) {
    const root = new protobuf.Root();
    for (const version of CRI_API_VERSIONS) {
      protobuf.parse(criProtoText(version), root, { keepCase: true });
    }
    root.resolveAll();
    services = { v1: serviceOf(root, "v1"), v1alpha2: serviceOf(root, "v1alpha2") };
  }
  return services;
}

function codec(type: protobuf.Type) {
  return {
    encode: (value: unknown) =>
      type.encode(type.fromObject(value as Record<string, unknown>)).finish(),
    decode: (bytes: Uint8Array) => type.toObject(type.decode(bytes), CONVERSION),
  };
}

function serviceOf(root: protobuf.Root, version: CriApiVersion): CriService {
  const name = `runtime.${version}.RuntimeService`;
  const service = root.lookupService(name);
  const methods = {} as CriService;
  for (const method of service.methodsArray) {
    const request = codec(method.resolvedRequestType!);
    const response = codec(method.resolvedResponseType!);
    methods[method.name as RuntimeMethod] = {
      path: `/${name}/${method.name}`,
      encodeRequest: request.encode,
      decodeRequest: request.decode,
      encodeResponse: response.encode,
      decodeResponse: response.decode,
    };
  }
  return methods;
}
