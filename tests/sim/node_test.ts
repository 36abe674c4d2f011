/**
 * The simulated node as the agent's own clients see it after an outage: the kubelet's admission
 * in its /pods and in the API server, and the wait before a returning parent's container exists,
 * over CRI.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { type Pod, podId } from "../../lib/core/pod.ts";
import { sanitizeCheckpoint } from "../../lib/core/sanitize.ts";
import { readManifestDir, renderManifest } from "../../lib/disk/manifests.ts";
import { connectNode } from "../../lib/sources/node.ts";
import { NODE_PORTS_REJECTION } from "../../lib/sim/kubelet_model.ts";
import { SimNode } from "../../lib/sim/node.ts";
import type { SourceResult } from "../../lib/sources/types.ts";
import { restoreParentPorts } from "../helpers/old_checkpoints.ts";

const APISERVER = "kube-system/kube-apiserver-7x2kq";

function value<T>(result: SourceResult<T>): T {
  if (!result.ok) throw new Error(`expected success, got ${JSON.stringify(result.failure)}`);
  return result.value;
}

/** Puts the apiserver's copy in the static-pod dir, with or without its parent's ports. */
async function activateCopy(node: SimNode, keepPorts: boolean): Promise<Pod> {
  const c = node.config();
  const parent = node.parents.find((p) => podId(p) === APISERVER)!;
  const { pod } = sanitizeCheckpoint(parent, c);
  const file = join(c.staticPodDir, "kube-system-kube-apiserver-7x2kq.json");
  await Deno.writeTextFile(file, renderManifest(pod));
  if (keepPorts) await restoreParentPorts(file, parent);
  return parent;
}

Deno.test("sim node: a copy declaring the parent's host port gets the returning parent rejected, in /pods and in the API server", async () => {
  const node = await SimNode.start();
  const sources = await connectNode(node.config());
  try {
    await node.loseControlPlane();
    await activateCopy(node, true);
    await node.sync();
    await node.restoreControlPlane();
    const statusOf = (pods: Pod[]) =>
      pods.find((p) => podId(p) === APISERVER)?.status as Record<string, unknown>;
    const rejected = { phase: "Failed", ...NODE_PORTS_REJECTION };
    assertEquals(statusOf(value(await sources.kubelet.listPods()).pods), rejected);
    assertEquals(statusOf(value(await sources.apiServer.listNodePods(node.nodeName))), rejected);
    // Never run, never retried.
    await node.advance(600_000);
    const running = value(await sources.runtime.listRunningPods()).map((p) => p.name);
    assertEquals(running.includes("kube-apiserver-7x2kq"), false);
    assert(running.includes("kube-apiserver-7x2kq-cp-1"));
  } finally {
    sources.runtime.close();
    await node.close();
  }
});

Deno.test("sim node: a returning parent has a ready sandbox first, a container only once the kubelet has read the services", async () => {
  const node = await SimNode.start({ kubelet: { servicesReadAfterMs: 2_000 } });
  const sources = await connectNode(node.config());
  try {
    await node.loseControlPlane();
    await activateCopy(node, false);
    await node.sync();
    const seen = node.events.length;
    await node.restoreControlPlane();
    const runs = async () =>
      value(await sources.runtime.listRunningPods()).some((p) =>
        `${p.namespace}/${p.name}` === APISERVER
      );
    const parentEvents = () =>
      node.events.slice(seen).filter((e) => e.pod === APISERVER).map((e) => e.event);
    assertEquals(parentEvents(), ["admitted", "sandbox-ready", "waiting"]);
    assertEquals(await runs(), false);
    await node.advance(9_000);
    assertEquals(await runs(), false);
    // The container is made; the copy holds 6443, so it exits: the kubelet has shown it can
    // start the parent.
    await node.advance(1_000);
    assertEquals(parentEvents().slice(3), ["container-exited"]);
    assertEquals(await runs(), true);
  } finally {
    sources.runtime.close();
    await node.close();
  }
});

Deno.test("sim node: the kubelet decodes static pods with its own reader: a copy the agent's reader takes for a checkpoint, but without kind, is never run, and is logged", async () => {
  const node = await SimNode.start();
  const sources = await connectNode(node.config());
  try {
    await node.loseControlPlane();
    await activateCopy(node, false);
    const dir = node.config().staticPodDir;
    const file = join(dir, "kube-system-kube-apiserver-7x2kq.json");
    const manifest = JSON.parse(await Deno.readTextFile(file));
    delete manifest.kind;
    await Deno.writeTextFile(file, JSON.stringify(manifest));
    const agentSees = (await readManifestDir(dir)).manifests.map((m) => podId(m.pod));
    assert(agentSees.includes(APISERVER));
    const copyRuns = async () =>
      value(await sources.runtime.listRunningPods()).some((p) =>
        p.name === "kube-apiserver-7x2kq-cp-1"
      );
    await node.advance(10_000);
    assertEquals(await copyRuns(), false);
    assertEquals(node.kubeletLog, [
      `Can't process manifest file "${file}": couldn't parse as pod(Object 'Kind' is missing), ` +
      "please check manifest file",
    ]);
    // Written whole, the same copy runs.
    await activateCopy(node, false);
    await node.sync();
    assertEquals(await copyRuns(), true);
  } finally {
    sources.runtime.close();
    await node.close();
  }
});

Deno.test("sim node: a DaemonSet-style rollout replaces the pod by one of a new name, uid and spec, of the same controller", async () => {
  const node = await SimNode.start();
  const sources = await connectNode(node.config());
  try {
    const old = node.parents.find((p) => podId(p) === APISERVER)!;
    const heir = await node.replaceParent(APISERVER, (pod) => {
      pod.metadata.labels = { ...pod.metadata.labels, "pod-template-generation": "2" };
      return pod;
    });
    assert(
      heir.metadata.name.startsWith("kube-apiserver-") &&
        heir.metadata.name !== "kube-apiserver-7x2kq",
    );
    assert(heir.metadata.uid !== old.metadata.uid);
    assertEquals(heir.metadata.ownerReferences, old.metadata.ownerReferences);
    assertEquals(heir.metadata.labels?.["pod-template-generation"], "2");
    const listed = value(await sources.apiServer.listNodePods(node.nodeName)).map(podId);
    assertEquals(listed.includes(APISERVER), false);
    assert(listed.includes(podId(heir)));
    await node.advance(5_000);
    const running = value(await sources.runtime.listRunningPods()).map((p) => p.name);
    assertEquals(running.includes("kube-apiserver-7x2kq"), false);
    assert(running.includes(heir.metadata.name));
  } finally {
    sources.runtime.close();
    await node.close();
  }
});
