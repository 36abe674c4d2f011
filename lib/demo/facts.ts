/**
 * What the story checks about the node, read from the cluster definition and the disk: the
 * parents and their copies, the files each checkpoint must have, the values its secrets and
 * configmaps hold.
 */
import { join, relative } from "node:path";
import {
  checkpointPaths,
  DIR_MODE,
  type FileAccess,
  storedAccess,
} from "../core/checkpoint_layout.ts";
import { asArray, isObject, type Json } from "../core/json.ts";
import { isValidParent, type Pod, podId } from "../core/pod.ts";
import type { ControlPlane } from "../sim/control_plane.ts";
import type { KubeletEvent, KubeletEventKind } from "../sim/kubelet_model.ts";
import type { SimNode } from "../sim/node.ts";
import { agentUid } from "../disk/dirs.ts";
import { readStoredVersions } from "../disk/versions.ts";
import { type DiskListing, formatMode } from "./disk.ts";
import { API_SERVER_LABELS, type DemoSession } from "./session.ts";

export function parentsOf(cluster: ControlPlane): Pod[] {
  return cluster.pods.filter(isValidParent).sort((a, b) => podId(a) < podId(b) ? -1 : 1);
}

/** Whether the kubelet did this to the pod since the `since`th event of its timeline. */
export function kubeletDid(node: SimNode, since: number, id: string, event: KubeletEventKind) {
  return node.events.slice(since).some((e) => e.pod === id && e.event === event);
}

/** What the kubelet did with the pod's containers, oldest first. */
export function kubeletEvents(
  node: SimNode,
  id: string,
  event: KubeletEventKind,
): KubeletEvent[] {
  return node.events.filter((e) => e.pod === id && e.event === event);
}

/** What the kubelet last did with the pod's containers. */
export function lastContainerEvent(node: SimNode, id: string): KubeletEventKind | undefined {
  return node.events.findLast((e) => e.pod === id && e.event.startsWith("container-"))?.event;
}

export function sameList(a: readonly string[], b: readonly string[]): boolean {
  const x = [...a].sort(), y = [...b].sort();
  return x.length === y.length && x.every((v, i) => v === y[i]);
}

/** Paths (relative to the node's root) of one checkpoint's files. */
export function checkpointFiles(session: DemoSession, id: string) {
  const rel = (path: string) => relative(session.node.root, path);
  const paths = checkpointPaths(session.config, id);
  return {
    inactive: rel(paths.inactiveManifest),
    active: rel(paths.activeManifest),
    secrets: rel(paths.secretsDir),
    configmaps: rel(paths.configmapsDir),
  };
}

export function entriesUnder(disk: DiskListing, dir: string) {
  return [...disk.values()].filter((e) => e.path.startsWith(`${dir}/`));
}

/** How a listed entry shows an owner and mode: `0640 0:65534`. */
function shown(access: FileAccess): string {
  return `${formatMode(access.mode)} ${access.uid}:${access.gid}`;
}

/**
 * The mode and owner each stored directory and file of the pod's checkpoint must show, and what
 * the agent's own directories between them show (`_volumes`).
 */
export function storedAccessOf(
  pod: Pod,
): { dir: string; file: string; above: string } | { error: string } {
  const access = storedAccess(pod, agentUid());
  if ("error" in access) return access;
  const above = shown({ uid: agentUid(), gid: 0, mode: DIR_MODE });
  return { dir: shown(access.dir), file: shown(access.file), above };
}

/** Who the pod's containers read their stored files as. */
export function ownerOf(pod: Pod): string {
  const access = storedAccess(pod, agentUid());
  return "error" in access ? access.error : `${access.file.uid}:${access.file.gid}`;
}

interface KeySelection {
  key: string;
}

interface ObjectRef {
  name?: string;
  secretName?: string;
  items?: KeySelection[];
}

interface Volume {
  secret?: ObjectRef;
  configMap?: ObjectRef;
  projected?: { sources?: { secret?: ObjectRef; configMap?: ObjectRef }[] };
}

/** Every value of every secret and configmap key the pod mounts: what its checkpoint stores. */
export function mountedValues(pod: Pod, cluster: ControlPlane): { key: string; value: string }[] {
  const values: { key: string; value: string }[] = [];
  const pick = (kind: "secret" | "configMap", ref: ObjectRef) => {
    const name = ref.secretName ?? ref.name;
    const objects = kind === "secret" ? cluster.secrets : cluster.configMaps;
    const object = objects.find((o) => o.namespace === pod.metadata.namespace && o.name === name);
    if (!object) return;
    const keys = ref.items ? ref.items.map((i) => i.key) : Object.keys(object.data);
    for (const key of keys) {
      values.push({ key: `${kind} ${name}: ${key}`, value: object.data[key] });
    }
  };
  const volumes = ((pod.spec ?? {}) as { volumes?: Volume[] }).volumes ?? [];
  for (const volume of volumes) {
    if (volume.secret) pick("secret", volume.secret);
    if (volume.configMap) pick("configMap", volume.configMap);
    for (const source of volume.projected?.sources ?? []) {
      if (source.secret) pick("secret", source.secret);
      if (source.configMap) pick("configMap", source.configMap);
    }
  }
  return values;
}

export async function readFiles(root: string, paths: string[]): Promise<string[]> {
  return await Promise.all(paths.map((path) => Deno.readTextFile(join(root, path))));
}

/** The API server's pod among these (`node.parents`: as the API server stores it now). */
export function apiServerPod(pods: readonly Pod[]): Pod {
  const pod = pods.find((p) =>
    Object.entries(API_SERVER_LABELS).every(([key, value]) => p.metadata.labels?.[key] === value)
  );
  if (!pod) throw new Error("the cluster has no API server pod");
  return pod;
}

function firstContainer(pod: Pod): Json | undefined {
  return asArray(isObject(pod.spec) ? pod.spec.containers : undefined)[0];
}

export function imageOf(pod: Pod): string | undefined {
  const image = firstContainer(pod)?.image;
  return typeof image === "string" ? image : undefined;
}

/** The pod's spec with another image, as `kubectl set image` writes it. */
export function setImage(pod: Pod, image: string): void {
  const container = firstContainer(pod);
  if (container) container.image = image;
}

/** The status the kubelet last reported of the pod's first container. */
export function containerStatusOf(pod: Pod): Json | undefined {
  return asArray(isObject(pod.status) ? pod.status.containerStatuses : undefined)[0];
}

/** The image of the manifest at `path` (relative to the node's root); undefined when it is gone. */
export async function manifestImage(
  session: DemoSession,
  path: string,
): Promise<string | undefined> {
  try {
    return imageOf(JSON.parse(await Deno.readTextFile(join(session.node.root, path))));
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
}

/**
 * The versions a checkpoint keeps, the image of the candidate waiting beside them, and since
 * when the agent has seen the candidate's pod Ready.
 */
export async function versionsOf(session: DemoSession, id: string) {
  const { versions, candidate } = await readStoredVersions(session.config, id);
  return {
    kept: versions.map((v) => v.version),
    candidate: candidate && imageOf(candidate.manifest),
    readySince: candidate?.readySince,
  };
}
