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
import { isValidParent, type Pod, podId } from "../core/pod.ts";
import type { ControlPlane } from "../sim/control_plane.ts";
import type { KubeletEventKind } from "../sim/kubelet_model.ts";
import type { SimNode } from "../sim/node.ts";
import { agentUid } from "../disk/dirs.ts";
import { type DiskListing, formatMode } from "./disk.ts";
import type { DemoSession } from "./session.ts";

export function parentsOf(cluster: ControlPlane): Pod[] {
  return cluster.pods.filter(isValidParent).sort((a, b) => podId(a) < podId(b) ? -1 : 1);
}

/** Whether the kubelet did this to the pod since the `since`th event of its timeline. */
export function kubeletDid(node: SimNode, since: number, id: string, event: KubeletEventKind) {
  return node.events.slice(since).some((e) => e.pod === id && e.event === event);
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
