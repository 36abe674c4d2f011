/**
 * The slice of the Kubernetes CRI that ckpt-agent speaks: method paths and message codecs shared
 * by the client (lib/sources/cri.ts) and the simulated runtime (lib/sim/cri_server.ts).
 *
 * Field numbers are those of k8s.io/cri-api, pkg/apis/runtime/v1/api.proto (package runtime.v1)
 * and pkg/apis/runtime/v1alpha2/api.proto (package runtime.v1alpha2); the two agree on every
 * number used here. Only the fields we read or send are declared: like every proto3 decoder this
 * one skips the rest, so a runtime that sends more (images, container statuses) still decodes.
 *
 * The protocol buffers wire format is written and read here rather than by a library: the
 * messages are few and flat, and protobufjs cost the daemon more memory (its code, and the
 * CommonJS loader it needs) than anything else it decoded, for four methods.
 *
 * Decoded messages look as protobufjs's `toObject` made them with `enums: String, longs:
 * String, defaults: true, arrays: true, objects: true`: field names as in the .proto, every
 * field present (message fields absent from the wire are null), enums by name (a number the
 * schema does not know stays a number), int64 as decimal strings, maps as plain objects.
 */

export type CriApiVersion = "v1" | "v1alpha2";

/** The newest first: the order in which the client probes. */
export const CRI_API_VERSIONS: readonly CriApiVersion[] = ["v1", "v1alpha2"];

type Enum = readonly string[];

const POD_SANDBOX_STATE: Enum = ["SANDBOX_READY", "SANDBOX_NOTREADY"];
const CONTAINER_STATE: Enum = [
  "CONTAINER_CREATED",
  "CONTAINER_RUNNING",
  "CONTAINER_EXITED",
  "CONTAINER_UNKNOWN",
];

type FieldType =
  | { kind: "string" | "uint32" | "int64" | "bool" | "map" }
  | { kind: "enum"; values: Enum }
  | { kind: "message"; of: () => Message; repeated?: boolean };

/** A message: its fields by name, each with its field number and type. */
type Message = Record<string, [number, FieldType]>;

const string = { kind: "string" } as const;
const uint32 = { kind: "uint32" } as const;
const int64 = { kind: "int64" } as const;
const bool = { kind: "bool" } as const;
const map = { kind: "map" } as const;
const enumOf = (values: Enum): FieldType => ({ kind: "enum", values });
const message = (of: () => Message): FieldType => ({ kind: "message", of });
const repeated = (of: () => Message): FieldType => ({ kind: "message", of, repeated: true });

const VersionRequest: Message = { version: [1, string] };
const VersionResponse: Message = {
  version: [1, string],
  runtime_name: [2, string],
  runtime_version: [3, string],
  runtime_api_version: [4, string],
};
const PodSandboxMetadata: Message = {
  name: [1, string],
  uid: [2, string],
  namespace: [3, string],
  attempt: [4, uint32],
};
const PodSandboxStateValue: Message = { state: [1, enumOf(POD_SANDBOX_STATE)] };
const PodSandboxFilter: Message = {
  id: [1, string],
  state: [2, message(() => PodSandboxStateValue)],
  label_selector: [3, map],
};
const ListPodSandboxRequest: Message = { filter: [1, message(() => PodSandboxFilter)] };
const PodSandbox: Message = {
  id: [1, string],
  metadata: [2, message(() => PodSandboxMetadata)],
  state: [3, enumOf(POD_SANDBOX_STATE)],
  created_at: [4, int64],
  labels: [5, map],
  annotations: [6, map],
  runtime_handler: [7, string],
};
const ListPodSandboxResponse: Message = { items: [1, repeated(() => PodSandbox)] };
const PodSandboxStatusRequest: Message = { pod_sandbox_id: [1, string], verbose: [2, bool] };
const PodIP: Message = { ip: [1, string] };
const PodSandboxNetworkStatus: Message = {
  ip: [1, string],
  additional_ips: [2, repeated(() => PodIP)],
};
const PodSandboxStatus: Message = {
  id: [1, string],
  metadata: [2, message(() => PodSandboxMetadata)],
  state: [3, enumOf(POD_SANDBOX_STATE)],
  created_at: [4, int64],
  network: [5, message(() => PodSandboxNetworkStatus)],
  labels: [7, map],
  annotations: [8, map],
  runtime_handler: [9, string],
};
const PodSandboxStatusResponse: Message = {
  status: [1, message(() => PodSandboxStatus)],
  info: [2, map],
};
const ContainerStateValue: Message = { state: [1, enumOf(CONTAINER_STATE)] };
const ContainerFilter: Message = {
  id: [1, string],
  state: [2, message(() => ContainerStateValue)],
  pod_sandbox_id: [3, string],
  label_selector: [4, map],
};
const ListContainersRequest: Message = { filter: [1, message(() => ContainerFilter)] };
const ContainerMetadata: Message = { name: [1, string], attempt: [2, uint32] };
const Container: Message = {
  id: [1, string],
  pod_sandbox_id: [2, string],
  metadata: [3, message(() => ContainerMetadata)],
  state: [6, enumOf(CONTAINER_STATE)],
  created_at: [7, int64],
  labels: [8, map],
  annotations: [9, map],
};
const ListContainersResponse: Message = { containers: [1, repeated(() => Container)] };

export type RuntimeMethod = "Version" | "PodSandboxStatus" | "ListPodSandbox" | "ListContainers";

const METHODS: Record<RuntimeMethod, [request: Message, response: Message]> = {
  Version: [VersionRequest, VersionResponse],
  PodSandboxStatus: [PodSandboxStatusRequest, PodSandboxStatusResponse],
  ListPodSandbox: [ListPodSandboxRequest, ListPodSandboxResponse],
  ListContainers: [ListContainersRequest, ListContainersResponse],
};

// ---------------------------------------------------------------- the wire format

const VARINT = 0, FIXED64 = 1, LENGTH_DELIMITED = 2, FIXED32 = 5;

class Reader {
  #at = 0;
  constructor(readonly bytes: Uint8Array, readonly end = bytes.length) {}

  get done(): boolean {
    return this.#at >= this.end;
  }

  #byte(): number {
    if (this.#at >= this.end) throw new Error("message cut short");
    return this.bytes[this.#at++];
  }

  /** A varint as a bigint, all 64 bits of it. */
  bigVarint(): bigint {
    let value = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      const byte = this.#byte();
      value |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) return BigInt.asUintN(64, value);
    }
    throw new Error("varint longer than 10 bytes");
  }

  /** A varint's low 32 bits, as an unsigned number. */
  varint32(): number {
    let value = 0;
    for (let shift = 0; shift < 28; shift += 7) {
      const byte = this.#byte();
      value |= (byte & 0x7f) << shift;
      if (byte < 0x80) return value >>> 0;
    }
    // Bits beyond the 32nd (int32 values are sign-extended to 64 bits) are read and dropped.
    return Number(BigInt.asUintN(32, (this.bigVarint() << 28n) | BigInt(value)));
  }

  /** The bytes of a length-delimited field. */
  chunk(): Uint8Array {
    const length = this.varint32();
    if (this.#at + length > this.end) throw new Error("message cut short");
    const chunk = this.bytes.subarray(this.#at, this.#at + length);
    this.#at += length;
    return chunk;
  }

  skip(wireType: number): void {
    if (wireType === VARINT) this.bigVarint();
    else if (wireType === LENGTH_DELIMITED) this.chunk();
    else if (wireType === FIXED64 || wireType === FIXED32) {
      const length = wireType === FIXED64 ? 8 : 4;
      if (this.#at + length > this.end) throw new Error("message cut short");
      this.#at += length;
    } else throw new Error(`wire type ${wireType} not supported`);
  }
}

const utf8 = new TextDecoder();
const toUtf8 = new TextEncoder();

/** The field number → name and type of each message, built once. */
const byNumber = new Map<Message, Map<number, [string, FieldType]>>();

function fieldsByNumber(type: Message): Map<number, [string, FieldType]> {
  let fields = byNumber.get(type);
  if (!fields) {
    fields = new Map(Object.entries(type).map(([name, [no, field]]) => [no, [name, field]]));
    byNumber.set(type, fields);
  }
  return fields;
}

function defaultOf(field: FieldType): unknown {
  switch (field.kind) {
    case "string":
      return "";
    case "uint32":
      return 0;
    case "int64":
      return "0";
    case "bool":
      return false;
    case "map":
      return {};
    case "enum":
      return field.values[0];
    case "message":
      return field.repeated ? [] : null;
  }
}

function wireTypeOf(field: FieldType): number {
  return field.kind === "string" || field.kind === "map" || field.kind === "message"
    ? LENGTH_DELIMITED
    : VARINT;
}

/** A map entry: key 1 and value 2, both strings. */
function decodeEntry(bytes: Uint8Array): [string, string] {
  const reader = new Reader(bytes);
  let key = "", value = "";
  while (!reader.done) {
    const tag = reader.varint32();
    const [no, wireType] = [tag >>> 3, tag & 7];
    if (no === 1 && wireType === LENGTH_DELIMITED) key = utf8.decode(reader.chunk());
    else if (no === 2 && wireType === LENGTH_DELIMITED) value = utf8.decode(reader.chunk());
    else reader.skip(wireType);
  }
  return [key, value];
}

export function decodeMessage(type: Message, bytes: Uint8Array): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, [, field]] of Object.entries(type)) out[name] = defaultOf(field);
  const fields = fieldsByNumber(type);
  const reader = new Reader(bytes);
  while (!reader.done) {
    const tag = reader.varint32();
    const [no, wireType] = [tag >>> 3, tag & 7];
    const known = fields.get(no);
    if (!known || wireTypeOf(known[1]) !== wireType) {
      reader.skip(wireType);
      continue;
    }
    const [name, field] = known;
    switch (field.kind) {
      case "string":
        out[name] = utf8.decode(reader.chunk());
        break;
      case "uint32":
        out[name] = reader.varint32();
        break;
      case "int64":
        out[name] = String(BigInt.asIntN(64, reader.bigVarint()));
        break;
      case "bool":
        out[name] = reader.bigVarint() !== 0n;
        break;
      case "enum": {
        const value = reader.varint32() | 0;
        out[name] = field.values[value] ?? value;
        break;
      }
      case "map": {
        const [key, value] = decodeEntry(reader.chunk());
        (out[name] as Record<string, string>)[key] = value;
        break;
      }
      case "message": {
        const value = decodeMessage(field.of(), reader.chunk());
        if (field.repeated) (out[name] as unknown[]).push(value);
        else out[name] = value;
      }
    }
  }
  return out;
}

class Writer {
  readonly #parts: number[] = [];

  varint(value: bigint | number): void {
    let v = BigInt.asUintN(64, BigInt(value));
    while (v >= 0x80n) {
      this.#parts.push(Number(v & 0x7fn) | 0x80);
      v >>= 7n;
    }
    this.#parts.push(Number(v));
  }

  tag(no: number, wireType: number): void {
    this.varint((no << 3) | wireType);
  }

  chunk(bytes: Uint8Array): void {
    this.varint(bytes.length);
    for (const byte of bytes) this.#parts.push(byte);
  }

  finish(): Uint8Array {
    return Uint8Array.from(this.#parts);
  }
}

function encodeEntry(key: string, value: string): Uint8Array {
  const entry = new Writer();
  entry.tag(1, LENGTH_DELIMITED);
  entry.chunk(toUtf8.encode(key));
  entry.tag(2, LENGTH_DELIMITED);
  entry.chunk(toUtf8.encode(value));
  return entry.finish();
}

function enumNumber(field: { values: Enum }, value: unknown, name: string): number {
  if (typeof value === "number") return value;
  const index = field.values.indexOf(String(value));
  if (index < 0) throw new Error(`${name}: ${JSON.stringify(value)} is not one of its values`);
  return index;
}

/** Writes the fields set (neither undefined nor null) in `value`, by field number. */
export function encodeMessage(type: Message, value: unknown): Uint8Array {
  const object = (value ?? {}) as Record<string, unknown>;
  const writer = new Writer();
  const fields = Object.entries(type).sort(([, [a]], [, [b]]) => a - b);
  for (const [name, [no, field]] of fields) {
    const v = object[name];
    if (v === undefined || v === null) continue;
    switch (field.kind) {
      case "string":
        writer.tag(no, LENGTH_DELIMITED);
        writer.chunk(toUtf8.encode(String(v)));
        break;
      case "uint32":
      case "int64":
        writer.tag(no, VARINT);
        writer.varint(BigInt(v as string | number | bigint));
        break;
      case "bool":
        writer.tag(no, VARINT);
        writer.varint(v ? 1 : 0);
        break;
      case "enum":
        writer.tag(no, VARINT);
        writer.varint(enumNumber(field, v, name));
        break;
      case "map":
        for (const [key, entry] of Object.entries(v as Record<string, unknown>)) {
          writer.tag(no, LENGTH_DELIMITED);
          writer.chunk(encodeEntry(key, String(entry)));
        }
        break;
      case "message":
        for (const item of field.repeated ? v as unknown[] : [v]) {
          writer.tag(no, LENGTH_DELIMITED);
          writer.chunk(encodeMessage(field.of(), item));
        }
    }
  }
  return writer.finish();
}

// ---------------------------------------------------------------- the service

/** One unary method: its HTTP/2 path and how each side's message is written and read. */
export interface CriMethod {
  path: string;
  encodeRequest(value: unknown): Uint8Array;
  decodeRequest(bytes: Uint8Array): unknown;
  encodeResponse(value: unknown): Uint8Array;
  decodeResponse(bytes: Uint8Array): unknown;
}

export type CriService = Record<RuntimeMethod, CriMethod>;

function serviceOf(version: CriApiVersion): CriService {
  const name = `runtime.${version}.RuntimeService`;
  const methods = {} as CriService;
  for (const [method, [request, response]] of Object.entries(METHODS)) {
    methods[method as RuntimeMethod] = {
      path: `/${name}/${method}`,
      encodeRequest: (value) => encodeMessage(request, value),
      decodeRequest: (bytes) => decodeMessage(request, bytes),
      encodeResponse: (value) => encodeMessage(response, value),
      decodeResponse: (bytes) => decodeMessage(response, bytes),
    };
  }
  return methods;
}

const SERVICES: Record<CriApiVersion, CriService> = {
  v1: serviceOf("v1"),
  v1alpha2: serviceOf("v1alpha2"),
};

/** The RuntimeService of each CRI package. */
export function criServices(): Record<CriApiVersion, CriService> {
  return SERVICES;
}
