/**
 * The simulated kubelet's file source: the static-pod directory read and decoded the way the
 * kubelet reads it (pkg/kubelet/config/file.go and common.go), with code of its own, so that the
 * end-to-end tests catch a manifest the agent writes or reads and a real kubelet would not run.
 *
 * - Every entry whose name does not start with a dot (the kubelet globs `[^.]*`), in name order,
 *   whatever its extension. A directory is not descended into, an entry that is neither a
 *   directory nor a regular file (symlinks followed) is skipped; both are logged.
 * - At most 10 MiB is read (maxConfigLength).
 * - A document starting with `{` is JSON; anything else is YAML, read as YAML 1.1 like the
 *   kubelet's converter (`yes` is a boolean, `0644` is 420), first document only.
 * - Decoded as an API object: apiVersion and kind are required, and only a v1 Pod is a pod. The
 *   fields read here must have the type the kubelet decodes them into; other fields are not
 *   looked at, and unknown fields are dropped without a word, as the kubelet drops them.
 * - metadata.name is required; an empty namespace becomes "default".
 * - The part of pod validation (ValidatePodCreate) a checkpoint could fail: names, containers
 *   and images, volumes with exactly one source and mounts naming them, owner references,
 *   probe and lifecycle ports, no ephemeral containers.
 * - A kubelet of 1.34 or later (PreventStaticPodAPIReferences, on by default) also refuses a
 *   static pod that references API objects: a service account, secrets and configmaps (image
 *   pull secrets, environment, volumes, projected sources), resource claims, claim-backed
 *   volumes.
 *
 * A file that fails is skipped, never run, and logged as the kubelet logs it.
 */
import { join } from "node:path";
import { parseAllDocuments } from "yaml";

/** A static pod as decoded, namespace defaulted; everything else as the file had it. */
export interface StaticPod {
  apiVersion: "v1";
  kind: "Pod";
  metadata: {
    name: string;
    namespace: string;
    uid?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    [field: string]: unknown;
  };
  spec: Record<string, unknown>;
  [field: string]: unknown;
}

export interface StaticPodDir {
  pods: StaticPod[];
  /** What the kubelet logged reading the directory: one line per entry it skipped. */
  log: { path: string; line: string }[];
}

/** The kubelet's maxConfigLength. */
export const MAX_MANIFEST_BYTES = 10 * 1024 * 1024;

type Obj = Record<string, unknown>;

class DecodeError extends Error {}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const IANA_SERVICE_NAME = /^(?=.*[a-z])[a-z0-9]+(-[a-z0-9]+)*$/;

const VOLUME_SOURCES = [
  "hostPath",
  "emptyDir",
  "gcePersistentDisk",
  "awsElasticBlockStore",
  "gitRepo",
  "secret",
  "nfs",
  "iscsi",
  "glusterfs",
  "persistentVolumeClaim",
  "rbd",
  "flexVolume",
  "cinder",
  "cephfs",
  "flocker",
  "downwardAPI",
  "fc",
  "azureFile",
  "configMap",
  "vsphereVolume",
  "quobyte",
  "azureDisk",
  "photonPersistentDisk",
  "projected",
  "portworxVolume",
  "scaleIO",
  "storageos",
  "csi",
  "ephemeral",
  "image",
];

/** Volume sources that make the kubelet ask the API server, and what they reference. */
const API_VOLUMES: Record<string, string> = {
  secret: "secrets (via secret volumes)",
  configMap: "configmaps (via configmap volumes)",
  csi: "csidrivers (via CSI volumes)",
  glusterfs: "endpoints (via glusterFS volumes)",
  persistentVolumeClaim: "persistentvolumeclaims",
  ephemeral: "persistentvolumeclaims (via ephemeral volumes)",
  azureFile: "secrets (via azureFile volumes)",
};

const API_PROJECTIONS: Record<string, string> = {
  configMap: "configmaps (via projected volumes)",
  secret: "secrets (via projected volumes)",
  serviceAccountToken: "serviceaccounts (via projected volumes)",
  clusterTrustBundle: "clustertrustbundles",
  podCertificate: "podcertificates",
};

const CONTAINER_LISTS = ["initContainers", "containers", "ephemeralContainers"] as const;

function kindOf(value: unknown): string {
  if (Array.isArray(value)) return "array";
  if (value === null) return "null";
  return typeof value === "object" ? "object" : typeof value;
}

/** The field at `path` of `obj` if it has the JSON type the kubelet decodes it into. */
function typed<T>(obj: Obj, key: string, path: string, want: string): T | undefined {
  const value = obj[key];
  if (value === undefined || value === null) return undefined;
  if (kindOf(value) !== want) {
    throw new DecodeError(`cannot unmarshal ${kindOf(value)} into ${path} of type ${want}`);
  }
  return value as T;
}

function objects(obj: Obj, key: string, path: string): Obj[] {
  const list = typed<unknown[]>(obj, key, path, "array") ?? [];
  return list.map((item, i) => {
    if (kindOf(item) !== "object") {
      throw new DecodeError(`cannot unmarshal ${kindOf(item)} into ${path}[${i}] of type object`);
    }
    return item as Obj;
  });
}

function stringMap(obj: Obj, key: string, path: string): Record<string, string> | undefined {
  const map = typed<Obj>(obj, key, path, "object");
  for (const k of Object.keys(map ?? {})) typed(map!, k, `${path}.${k}`, "string");
  return map as Record<string, string> | undefined;
}

/** The first document, as the kubelet's converter reads it. */
function parseDocument(text: string): unknown {
  if (text.trimStart().startsWith("{")) return JSON.parse(text);
  const [first] = parseAllDocuments(text, { version: "1.1", uniqueKeys: false });
  if (!first) return null;
  if (first.errors.length > 0) throw new DecodeError(first.errors[0].message.split("\n")[0]);
  return first.toJS();
}

/** Errors of the checks of ValidatePodCreate a checkpoint could fail, as field paths. */
function validationErrors(pod: StaticPod, nodeName: string): string[] {
  const errors: string[] = [];
  const meta = pod.metadata;
  const spec = pod.spec;
  const name = `${meta.name}-${nodeName.toLowerCase()}`;
  if (name.length > 253 || !DNS_SUBDOMAIN.test(name)) {
    errors.push(`metadata.name: Invalid value: "${name}": not a DNS-1123 subdomain`);
  }
  if (meta.namespace.length > 63 || !DNS_LABEL.test(meta.namespace)) {
    errors.push(`metadata.namespace: Invalid value: "${meta.namespace}": not a DNS-1123 label`);
  }
  objects(meta, "ownerReferences", "metadata.ownerReferences").forEach((ref, i) => {
    for (const field of ["apiVersion", "kind", "name", "uid"]) {
      const path = `metadata.ownerReferences[${i}].${field}`;
      if (!typed<string>(ref, field, path, "string")) errors.push(`${path}: Required value`);
    }
  });
  const volumes = new Set<string>();
  objects(spec, "volumes", "spec.volumes").forEach((volume, i) => {
    const path = `spec.volumes[${i}]`;
    const volumeName = typed<string>(volume, "name", `${path}.name`, "string") ?? "";
    if (!DNS_LABEL.test(volumeName)) errors.push(`${path}.name: Invalid value: "${volumeName}"`);
    if (volumes.has(volumeName)) errors.push(`${path}.name: Duplicate value: "${volumeName}"`);
    volumes.add(volumeName);
    const sources = VOLUME_SOURCES.filter((source) => volume[source] != null);
    if (sources.length === 0) errors.push(`${path}: Required value: must specify a volume type`);
    if (sources.length > 1) {
      errors.push(`${path}.${sources[1]}: Forbidden: may not specify more than 1 volume type`);
    }
  });
  if (objects(spec, "containers", "spec.containers").length === 0) {
    errors.push("spec.containers: Required value");
  }
  if (objects(spec, "ephemeralContainers", "spec.ephemeralContainers").length > 0) {
    errors.push("spec.ephemeralContainers: Forbidden: cannot be set on create");
  }
  const containerNames = new Set<string>();
  for (const list of CONTAINER_LISTS) {
    objects(spec, list, `spec.${list}`).forEach((container, i) => {
      const path = `spec.${list}[${i}]`;
      const containerName = typed<string>(container, "name", `${path}.name`, "string") ?? "";
      if (!DNS_LABEL.test(containerName)) {
        errors.push(`${path}.name: Invalid value: "${containerName}"`);
      }
      if (containerNames.has(containerName)) {
        errors.push(`${path}.name: Duplicate value: "${containerName}"`);
      }
      containerNames.add(containerName);
      if (!typed<string>(container, "image", `${path}.image`, "string")) {
        errors.push(`${path}.image: Required value`);
      }
      objects(container, "volumeMounts", `${path}.volumeMounts`).forEach((mount, j) => {
        const mountName = typed<string>(mount, "name", `${path}.volumeMounts[${j}].name`, "string");
        if (!volumes.has(mountName ?? "")) {
          errors.push(`${path}.volumeMounts[${j}].name: Not found: "${mountName ?? ""}"`);
        }
      });
      errors.push(...portErrors(container, path));
    });
  }
  return errors;
}

/** Probe and lifecycle handler ports: a number from 1 to 65535, or a service name. */
function portErrors(container: Obj, path: string): string[] {
  const handlers: [string, Obj][] = [];
  for (const probe of ["livenessProbe", "readinessProbe", "startupProbe"]) {
    const handler = typed<Obj>(container, probe, `${path}.${probe}`, "object");
    if (handler) handlers.push([`${path}.${probe}`, handler]);
  }
  const lifecycle = typed<Obj>(container, "lifecycle", `${path}.lifecycle`, "object") ?? {};
  for (const hook of ["postStart", "preStop"]) {
    const handler = typed<Obj>(lifecycle, hook, `${path}.lifecycle.${hook}`, "object");
    if (handler) handlers.push([`${path}.lifecycle.${hook}`, handler]);
  }
  const errors: string[] = [];
  for (const [where, handler] of handlers) {
    for (const action of ["httpGet", "tcpSocket", "grpc"]) {
      const target = typed<Obj>(handler, action, `${where}.${action}`, "object");
      if (!target) continue;
      const port = target.port;
      const valid = typeof port === "number"
        ? Number.isInteger(port) && port >= 1 && port <= 65535
        : action !== "grpc" && typeof port === "string" && port.length <= 15 &&
          IANA_SERVICE_NAME.test(port);
      if (!valid) errors.push(`${where}.${action}.port: Invalid value: ${JSON.stringify(port)}`);
    }
  }
  return errors;
}

/** The API objects a static pod references, as a kubelet of 1.34 or later names them. */
function apiReference(spec: Obj): string | undefined {
  if (typed<string>(spec, "serviceAccountName", "spec.serviceAccountName", "string")) {
    return "serviceaccounts";
  }
  if (objects(spec, "imagePullSecrets", "spec.imagePullSecrets").length > 0) return "secrets";
  for (const list of CONTAINER_LISTS) {
    for (const [i, container] of objects(spec, list, `spec.${list}`).entries()) {
      const path = `spec.${list}[${i}]`;
      for (const [j, env] of objects(container, "env", `${path}.env`).entries()) {
        const from = typed<Obj>(env, "valueFrom", `${path}.env[${j}].valueFrom`, "object") ?? {};
        if (from.secretKeyRef != null) return "secrets";
        if (from.configMapKeyRef != null) return "configmaps";
      }
      for (const source of objects(container, "envFrom", `${path}.envFrom`)) {
        if (source.secretRef != null) return "secrets";
        if (source.configMapRef != null) return "configmaps";
      }
    }
  }
  if (objects(spec, "resourceClaims", "spec.resourceClaims").length > 0) return "resourceclaims";
  for (const [i, volume] of objects(spec, "volumes", "spec.volumes").entries()) {
    const source = VOLUME_SOURCES.find((s) => volume[s] != null);
    if (source && API_VOLUMES[source]) return API_VOLUMES[source];
    if (source && (volume[source] as Obj).secretRef != null) return "secrets";
    if (source !== "projected") continue;
    const projected = volume.projected as Obj;
    const path = `spec.volumes[${i}].projected.sources`;
    for (const projection of objects(projected, "sources", path)) {
      const kind = Object.keys(API_PROJECTIONS).find((k) => projection[k] != null);
      if (kind) return API_PROJECTIONS[kind];
    }
  }
  return undefined;
}

/**
 * One manifest as the kubelet decodes it: the pod it would run, or why it would not. `nodeName`
 * is the node's name, which the kubelet appends to the pod's name before validating it.
 */
export type Decoded = { pod: StaticPod } | { error: string };

export function decodeStaticPod(text: string, nodeName: string): Decoded {
  let doc: unknown;
  try {
    doc = parseDocument(text);
  } catch (e) {
    return { error: `couldn't parse as pod(${(e as Error).message}), please check manifest file` };
  }
  try {
    if (kindOf(doc) !== "object") {
      throw new DecodeError(`cannot unmarshal ${kindOf(doc)} into an API object`);
    }
    const obj = doc as Obj;
    const kind = typed<string>(obj, "kind", "kind", "string");
    const apiVersion = typed<string>(obj, "apiVersion", "apiVersion", "string");
    if (!kind) throw new DecodeError("Object 'Kind' is missing");
    if (!apiVersion) throw new DecodeError("Object 'apiVersion' is missing");
    if (kind !== "Pod" || apiVersion !== "v1") {
      throw new DecodeError(`invalid pod: ${apiVersion}, Kind=${kind} is not a v1 Pod`);
    }
    const meta = typed<Obj>(obj, "metadata", "metadata", "object") ?? {};
    const name = typed<string>(meta, "name", "metadata.name", "string");
    const namespace = typed<string>(meta, "namespace", "metadata.namespace", "string");
    typed(meta, "uid", "metadata.uid", "string");
    stringMap(meta, "labels", "metadata.labels");
    stringMap(meta, "annotations", "metadata.annotations");
    if (!name) return { error: "invalid pod: name is needed for the pod" };
    const pod = {
      ...obj,
      metadata: { ...meta, name, namespace: namespace || "default" },
      spec: typed<Obj>(obj, "spec", "spec", "object") ?? {},
    } as StaticPod;
    const errors = validationErrors(pod, nodeName);
    if (errors.length > 0) return { error: `invalid pod: [${errors.join(", ")}]` };
    const reference = apiReference(pod.spec);
    if (reference) return { error: `static pods may not reference ${reference}` };
    return { pod };
  } catch (e) {
    if (e instanceof DecodeError) {
      return { error: `couldn't parse as pod(${e.message}), please check manifest file` };
    }
    throw e;
  }
}

/** The static-pod directory as the kubelet's file source reads it; a missing one is empty. */
export function readStaticPodDir(dir: string, nodeName: string): StaticPodDir {
  const out: StaticPodDir = { pods: [], log: [] };
  let names: string[];
  try {
    names = [...Deno.readDirSync(dir)].map((e) => e.name).filter((n) => !n.startsWith("."));
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return out;
    throw e;
  }
  for (const path of names.sort().map((n) => join(dir, n))) {
    let decoded: Decoded;
    try {
      const info = Deno.statSync(path);
      if (info.isDirectory) {
        out.log.push({ path, line: `Not recursing into manifest path "${path}"` });
        continue;
      }
      if (!info.isFile) {
        out.log.push({ path, line: `Manifest path "${path}" is not a directory or file` });
        continue;
      }
      decoded = info.size > MAX_MANIFEST_BYTES
        ? { error: "the read limit is reached" }
        : decodeStaticPod(new TextDecoder().decode(Deno.readFileSync(path)), nodeName);
    } catch (e) {
      decoded = { error: (e as Error).message };
    }
    if ("error" in decoded) {
      out.log.push({ path, line: `Can't process manifest file "${path}": ${decoded.error}` });
    } else {
      out.pods.push(decoded.pod);
    }
  }
  return out;
}
