/**
 * Turning a parent pod into a checkpoint (docs/design.md#making-a-checkpoint), as a pure function: the sanitized
 * manifest, plus a description of the files its rewritten volumes need. Fetching secrets and
 * writing files happen elsewhere; this module only decides what they must be.
 */
import {
  FIRST_VERSION,
  type StoredFileDirs,
  unsafeVolumePath,
  volumeDir,
} from "./checkpoint_layout.ts";
import { checkpointPodName, isValidLabel, isValidObjectName } from "./ids.ts";
import { CHECKPOINT_OF_ANNOTATION, type Pod, podId } from "./pod.ts";
import { renderFieldRef, renderResourceFieldRef } from "./downward_api.ts";
import { asArray, isObject, type Json } from "./json.ts";
import { dropPortDeclarations } from "./ports.ts";

export interface KeyToPath {
  key: string;
  path: string;
}

/** Keys of a secret or configmap; without items every key becomes a file of its own name. */
export interface KeySource {
  kind: "secret" | "configMap";
  name: string;
  optional: boolean;
  items?: KeyToPath[];
}

/** Where the files of one rewritten volume come from: objects to fetch, or content known now. */
export type FileSource = KeySource | { kind: "literal"; path: string; content: string };

export interface VolumeFiles {
  volume: string;
  /** The configured directory `dir` is under: the secrets dir or the configmaps dir. */
  root: string;
  /** The hostPath directory the checkpoint mounts instead of the original volume. */
  dir: string;
  sources: FileSource[];
}

/**
 * A parent whose checkpoint would need a path built from a name no Kubernetes object or volume
 * can have (a volume name that is no DNS-1123 label, a required secret or configmap whose name
 * is no DNS subdomain, an item path that leaves its volume): the API server lets some of these
 * through (`secretName: "t/u"`), a kubelet's answer may hold anything, and none may ever become
 * a directory outside `<dir>/<ns>/<pod>/<volume>`. Nothing of such a checkpoint is written.
 */
export class CheckpointRefused extends Error {
  override name = "CheckpointRefused";

  constructor(reason: string) {
    super(`cannot be checkpointed: ${reason}`);
  }
}

/** Where checkpoints are made: the directories of stored files, and the node's name. */
export type CheckpointSite = StoredFileDirs & { nodeName: string };

export interface SanitizedCheckpoint {
  pod: Pod;
  volumes: VolumeFiles[];
  /** Parts of the parent a checkpoint cannot reproduce, said once so operators know. */
  warnings: string[];
}

/** An item's path, refused unless it stays inside its volume. */
function itemPath(volume: string, path: unknown): string {
  const problem = typeof path === "string" ? unsafeVolumePath(path) : "not a string";
  if (problem !== undefined) {
    throw new CheckpointRefused(
      `volume ${volume}: item path ${JSON.stringify(path)} refused: ${problem}`,
    );
  }
  return path as string;
}

function keyItems(volume: string, value: unknown): KeyToPath[] | undefined {
  if (!Array.isArray(value) || value.length === 0) return undefined;
  return asArray(value).map((item) => ({
    key: String(item.key),
    path: itemPath(volume, item.path),
  }));
}

interface VolumeContext {
  parent: Pod;
  dirs: StoredFileDirs;
  version: number;
  warnings: string[];
}

/**
 * The keys a volume takes from one secret or configmap; undefined for an optional one whose
 * name no object can have: as the kubelet, which finds no such object, the volume gets nothing
 * from it.
 */
function keySource(
  ctx: VolumeContext,
  volume: string,
  kind: KeySource["kind"],
  name: unknown,
  src: Json,
): KeySource | undefined {
  const optional = src.optional === true;
  if (typeof name !== "string" || !isValidObjectName(name)) {
    const what = `volume ${volume}: ${kind} name ${JSON.stringify(name)} is not a valid name`;
    if (!optional) throw new CheckpointRefused(`${what}, and the ${kind} is not optional`);
    ctx.warnings.push(`${what}; no object can have it, so the volume gets nothing from it`);
    return undefined;
  }
  const items = keyItems(volume, src.items);
  return { kind, name, optional, ...(items ? { items } : {}) };
}

function downwardFiles(ctx: VolumeContext, volume: string, items: unknown): FileSource[] {
  const files: FileSource[] = [];
  for (const item of asArray(items)) {
    const path = itemPath(volume, item.path);
    const rendered = isObject(item.fieldRef)
      ? renderFieldRef(ctx.parent, String(item.fieldRef.fieldPath))
      : isObject(item.resourceFieldRef)
      ? renderResourceFieldRef(ctx.parent, item.resourceFieldRef)
      : { error: "item has neither fieldRef nor resourceFieldRef" };
    if ("error" in rendered) {
      ctx.warnings.push(`volume ${volume}: downward API file ${path} left out: ${rendered.error}`);
    } else {
      files.push({ kind: "literal", path, content: rendered.value });
    }
  }
  return files;
}

function projectedSources(ctx: VolumeContext, volume: string, projected: Json): FileSource[] {
  const sources: FileSource[] = [];
  for (const src of asArray(projected.sources)) {
    const kind = (["secret", "configMap"] as const).find((k) => isObject(src[k]));
    if (kind) {
      const keys = keySource(ctx, volume, kind, (src[kind] as Json).name, src[kind] as Json);
      if (keys) sources.push(keys);
    } else if (isObject(src.downwardAPI)) {
      sources.push(...downwardFiles(ctx, volume, src.downwardAPI.items));
    } else if (!isObject(src.serviceAccountToken)) {
      // Service-account tokens are dropped on purpose (docs/design.md#projected-volumes); anything else is news.
      const kinds = Object.keys(src).join(", ") || "empty source";
      ctx.warnings.push(`volume ${volume}: projected source ${kinds} cannot be checkpointed`);
    }
  }
  return sources;
}

const KEY_VOLUMES = [
  { kind: "secret", nameField: "secretName", base: "secretsDir" },
  { kind: "configMap", nameField: "name", base: "configmapsDir" },
] as const;

/**
 * Rewrites one volume in place to a hostPath, returning the files that path must hold; a
 * volume that is not rewritten is left as it is.
 */
function rewriteVolume(ctx: VolumeContext, volume: Json): VolumeFiles | undefined {
  const ns = ctx.parent.metadata.namespace, pod = ctx.parent.metadata.name;
  const keyVolume = KEY_VOLUMES.find(({ kind }) => isObject(volume[kind]));
  if (!keyVolume && !isObject(volume.projected)) return undefined;
  if (typeof volume.name !== "string" || !isValidLabel(volume.name)) {
    throw new CheckpointRefused(
      `volume name ${JSON.stringify(volume.name)} is not a valid volume name (a DNS-1123 label)`,
    );
  }
  const name = volume.name;
  let files: VolumeFiles;
  if (keyVolume) {
    const { kind, nameField, base } = keyVolume;
    const src = volume[kind] as Json;
    const source = keySource(ctx, name, kind, src[nameField], src);
    const root = ctx.dirs[base];
    // A volume with every key of one object is stored under the object's name, as the
    // original checkpointer stored it; anything else under the volume's.
    const object = source && !source.items ? source.name : undefined;
    files = {
      volume: name,
      root,
      dir: volumeDir(root, ns, pod, name, object, ctx.version),
      sources: source ? [source] : [],
    };
    delete volume[kind];
  } else {
    const root = ctx.dirs.secretsDir;
    files = {
      volume: name,
      root,
      dir: volumeDir(root, ns, pod, name, undefined, ctx.version),
      sources: projectedSources(ctx, name, volume.projected as Json),
    };
    delete volume.projected;
  }
  volume.hostPath = { path: files.dir };
  return files;
}

/**
 * Every mount of a rewritten volume is read-only, whatever the parent said, as the kubelet
 * mounts secret, configMap, projected and downward-API volumes: a container that could write
 * its volume could plant links for the agent, which writes there as root, to follow.
 */
function mountReadOnly(spec: Json, volumes: ReadonlySet<string>) {
  for (const container of [...asArray(spec.initContainers), ...asArray(spec.containers)]) {
    for (const mount of asArray(container.volumeMounts)) {
      if (typeof mount.name === "string" && volumes.has(mount.name)) mount.readOnly = true;
    }
  }
}

/**
 * The checkpoint of a parent pod: same name (unless the kubelet could not run a static pod of it
 * on `site`'s node: then shortened, checkpointPodName), namespace and labels; one annotation
 * naming the parent; the parent as controlling owner; no service account, pull secrets, ephemeral
 * containers, affinity, node selector, status or ports; secret, configMap and projected volumes
 * rewritten as hostPath volumes onto the files of checkpoint version `version`
 * (versionRoot in lib/core/checkpoint_layout.ts), mounted read-only. Throws CheckpointRefused
 * for a parent no checkpoint may be made of.
 */
export function sanitizeCheckpoint(
  parent: Pod,
  site: CheckpointSite,
  version = FIRST_VERSION,
): SanitizedCheckpoint {
  const copy = structuredClone(parent) as Json;
  const meta = parent.metadata;
  const spec: Json = isObject(copy.spec) ? copy.spec : {};
  delete spec.serviceAccountName;
  delete spec.serviceAccount;
  delete spec.affinity;
  delete spec.nodeSelector;
  // The kubelet reads pull secrets from the API server, which is gone when a copy is needed,
  // and from 1.34 refuses a static pod that names any secret; the parent's image is on the node.
  delete spec.imagePullSecrets;
  // The kubelet validates a static pod as a pod being created, and ephemeral containers (added
  // by `kubectl debug`) cannot be set on create: a copy with them would never run.
  delete spec.ephemeralContainers;
  const portWarnings = dropPortDeclarations(spec);

  const ctx: VolumeContext = { parent, dirs: site, version, warnings: [] };
  const volumes: VolumeFiles[] = [];
  for (const volume of asArray(spec.volumes)) {
    const files = rewriteVolume(ctx, volume);
    if (files) volumes.push(files);
  }
  mountReadOnly(spec, new Set(volumes.map((v) => v.volume)));

  const pod: Pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: checkpointPodName(podId(parent), site.nodeName),
      namespace: meta.namespace,
      ...(meta.labels ? { labels: structuredClone(meta.labels) } : {}),
      annotations: { [CHECKPOINT_OF_ANNOTATION]: meta.name },
      ownerReferences: [{
        // Items of a PodList carry no apiVersion or kind; a Pod's are always v1 Pod.
        apiVersion: parent.apiVersion || "v1",
        kind: parent.kind || "Pod",
        name: meta.name,
        uid: meta.uid ?? "",
        controller: true,
      }],
    },
    spec,
  };
  return {
    pod,
    volumes,
    warnings: [...ctx.warnings, ...portWarnings, ...apiReferences(pod)],
  };
}

/**
 * What a checkpoint still takes from the API server, one line each: environment from secrets
 * or configmaps (`valueFrom.secretKeyRef`, `configMapKeyRef`, `envFrom`), volumes backed by API
 * objects (claims, CSI drivers, secrets a volume plugin logs in with) and resource claims. The
 * kubelet asks the API server for those when it starts the pod, so such a checkpoint cannot
 * start while the API server is down, which is when it is needed; and a kubelet from 1.34
 * (PreventStaticPodAPIReferences) refuses such a static pod outright. Inlining secret values
 * would put them in a manifest the kubelet mirrors into the API server as a pod anyone who can
 * read pods may read; the references are kept, and said.
 */
export function apiReferences(pod: Pod): string[] {
  const spec: Json = isObject(pod.spec) ? pod.spec : {};
  const references: string[] = [];
  for (const container of [...asArray(spec.initContainers), ...asArray(spec.containers)]) {
    const where = `container ${String(container.name)}`;
    for (const env of asArray(container.env)) {
      const from = isObject(env.valueFrom) ? env.valueFrom : {};
      for (const [field, kind] of [["secretKeyRef", "secret"], ["configMapKeyRef", "configmap"]]) {
        const ref = from[field];
        if (!isObject(ref)) continue;
        references.push(
          `${where}: env ${String(env.name)} comes from ${kind} ${String(ref.name)} ` +
            `(key ${String(ref.key)})`,
        );
      }
    }
    for (const source of asArray(container.envFrom)) {
      for (const [field, kind] of [["secretRef", "secret"], ["configMapRef", "configmap"]]) {
        const ref = source[field];
        if (!isObject(ref)) continue;
        references.push(`${where}: envFrom ${kind} ${String(ref.name)}`);
      }
    }
  }
  for (const volume of asArray(spec.volumes)) {
    const what = apiVolume(volume);
    if (what) references.push(`volume ${String(volume.name)}: ${what}`);
  }
  if (asArray(spec.resourceClaims).length > 0) references.push("resourceClaims");
  return references.map((r) =>
    `${r}, which a static pod cannot read while the API server is down (and a kubelet from ` +
    "1.34 refuses it outright)"
  );
}

/** Volume sources the kubelet resolves through the API server, by what they reference. */
const API_VOLUMES: Record<string, string> = {
  persistentVolumeClaim: "a persistent volume claim",
  ephemeral: "a persistent volume claim (ephemeral volume)",
  csi: "a CSI driver",
  glusterfs: "glusterfs endpoints",
  azureFile: "an azureFile secret",
};

/** What a volume (secret, configMap and projected ones already rewritten) takes from the API. */
function apiVolume(volume: Json): string | undefined {
  for (const [source, what] of Object.entries(API_VOLUMES)) {
    if (isObject(volume[source])) return what;
  }
  // cephfs, rbd, iscsi, flexVolume, scaleIO, storageos: a secret to log in with.
  for (const [source, config] of Object.entries(volume)) {
    if (isObject(config) && isObject(config.secretRef)) return `a ${source} secret`;
  }
  return undefined;
}
