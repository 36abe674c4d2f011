/**
 * DaemonSet rollouts on a simulated node, with the real agent: the new pod (a new name, the same
 * controller) inherits the old pod's checkpoint, re-made for its own identity with copies of its
 * files, and its own spec waits as a candidate. A rollout to a spec that never becomes Ready
 * keeps the old spec, which a power cut then runs; a good rollout is promoted after
 * promoteAfter.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import {
  CANDIDATE_FILE,
  checkpointPaths,
  hostPathsOf,
  manifestFileName,
  versionsDir,
} from "../../lib/core/checkpoint_layout.ts";
import { asArray } from "../../lib/core/json.ts";
import { CHECKPOINT_OF_ANNOTATION, type Pod, podId } from "../../lib/core/pod.ts";
import type { Config } from "../../lib/config/types.ts";
import { formatListing, listCheckpoints } from "../../lib/commands/status.ts";
import { pathExists } from "../../lib/disk/dirs.ts";
import { versionsView } from "../../lib/disk/versions.ts";
import { type AgentOnNode, withAgentOnNode } from "../helpers/agent_on_node.ts";
import { containerOf, POLL_MS, promotionTime, readPod, runFor } from "../helpers/promotion.ts";

const OLD = "kube-system/kube-apiserver-7x2kq";

/** The files under `dir`, by relative path. */
async function filesUnder(dir: string, prefix = ""): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for await (const entry of Deno.readDir(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory) Object.assign(out, await filesUnder(path, `${prefix}${entry.name}/`));
    else out[`${prefix}${entry.name}`] = await Deno.readTextFile(path);
  }
  return out;
}

/** What each volume of a checkpoint mounts holds, by volume name. */
async function mountedFiles(pod: Pod): Promise<Record<string, Record<string, string>>> {
  const volumes = (pod.spec as { volumes: { name: string; hostPath?: { path: string } }[] })
    .volumes;
  const out: Record<string, Record<string, string>> = {};
  for (const v of volumes) {
    if (v.hostPath && !v.hostPath.path.startsWith("/etc/ssl")) {
      out[v.name] = await filesUnder(v.hostPath.path);
    }
  }
  return out;
}

/** The checkpoint is `heir`'s own: its name, owner and files, none of another pod's. */
function assertIdentity(c: Config, checkpoint: Pod, heir: Pod) {
  assertEquals(checkpoint.metadata.name, heir.metadata.name);
  assertEquals(checkpoint.metadata.annotations?.[CHECKPOINT_OF_ANNOTATION], heir.metadata.name);
  const owner = asArray(checkpoint.metadata.ownerReferences)[0];
  assertEquals({ name: owner.name, uid: owner.uid }, {
    name: heir.metadata.name,
    uid: heir.metadata.uid,
  });
  const own = checkpointPaths(c, podId(heir));
  const dirs = hostPathsOf(checkpoint).filter((d) => !d.startsWith("/etc/ssl"));
  assert(dirs.length >= 3, JSON.stringify(dirs));
  for (const dir of dirs) {
    assert(
      dir.startsWith(`${own.secretsDir}/`) || dir.startsWith(`${own.configmapsDir}/`),
      `${dir} is ${heir.metadata.name}'s`,
    );
  }
}

/** The agent with promoteAfter 60 s, after the pass that took the first checkpoints. */
function afterFirstPass(fn: (n: AgentOnNode, c: Config, good: Pod) => Promise<void>) {
  return withAgentOnNode({}, { promoteAfterMs: 60_000, pollIntervalMs: POLL_MS }, async (n) => {
    const c = n.config();
    assertEquals((await n.pass()).errors, []);
    await fn(n, c, await readPod(join(c.inactiveDir, manifestFileName(OLD))));
  });
}

/** A DaemonSet rollout of the API server with `change`; the new pod. */
function rollout(n: AgentOnNode, change: (pod: Pod) => void): Promise<Pod> {
  return n.node.replaceParent(OLD, (pod) => {
    pod.metadata.labels = { ...pod.metadata.labels, "pod-template-generation": "2" };
    change(pod);
    return pod;
  });
}

Deno.test("a DaemonSet rollout that never becomes Ready keeps the old spec, and an outage runs it", async () => {
  await afterFirstPass(async (n, c, good) => {
    const goodFiles = await mountedFiles(good);
    const goodImage = containerOf(good).image;
    const badImage = "registry.k8s.io/kube-apiserver:v1.99.0-typo";
    n.node.breakImage(badImage);
    const heir = await rollout(n, (pod) => {
      containerOf(pod).image = badImage;
    });
    const ID = podId(heir);
    assert(ID !== OLD);
    const inactive = join(c.inactiveDir, manifestFileName(ID));
    await runFor(n, POLL_MS);
    assertEquals(
      n.log.find("checkpoint inherited from its predecessor").map((l) => [
        l.id,
        l.version,
        l.from,
        l.fromVersion,
      ]),
      [[ID, 1, OLD, 1]],
    );

    await runFor(n, 300_000);
    const kept = await readPod(inactive);
    assertEquals(containerOf(kept).image, goodImage, "the old spec is the new pod's checkpoint");
    assertEquals(kept.metadata.labels?.["pod-template-generation"], "1");
    assertIdentity(c, kept, heir);
    assertEquals(await mountedFiles(kept), goodFiles, "copies of the old version's files");
    const candidate = JSON.parse(await Deno.readTextFile(join(versionsDir(c, ID), CANDIDATE_FILE)));
    assertEquals(candidate.version, 2);
    assertEquals(containerOf(candidate.manifest).image, badImage);
    assertEquals(n.log.find("candidate promoted"), []);
    const view = await versionsView(c, ID, manifestFileName(ID));
    assertEquals(view.kept, 1);
    assertEquals(view.inheritedFrom, { id: OLD, version: 1 });
    const listing = formatListing(await listCheckpoints(c));
    assert(listing.includes(`1 (from ${OLD} v1)`), listing);
    // The old pod's checkpoint went after its grace period, as before: the new one needs none
    // of its files.
    assertEquals(await pathExists(join(c.inactiveDir, manifestFileName(OLD))), false);
    assertEquals(await pathExists(checkpointPaths(c, OLD).secretsDir), false);
    assertEquals(await pathExists(versionsDir(c, OLD)), false);

    await n.node.loseControlPlane();
    await runFor(n, 30_000);
    const active = await readPod(join(c.staticPodDir, manifestFileName(ID)));
    assertEquals(containerOf(active).image, goodImage);
    assertIdentity(c, active, heir);
    assertEquals(await mountedFiles(active), goodFiles);
    const copy = `${ID}-${n.node.nodeName}`;
    assert(
      n.node.events.some((e) => e.pod === copy && e.event === "container-running"),
      "the kubelet runs the copy of the good spec under the new pod's name",
    );
  });
});

Deno.test("a good DaemonSet rollout is promoted after promoteAfter; a pin carries over", async () => {
  await afterFirstPass(async (n, c, old) => {
    // The old version lost its configmap's files: the new one fetches them instead.
    const audit = hostPathsOf(old).find((d) => d.startsWith(c.configmapsDir))!;
    await Deno.remove(audit, { recursive: true });
    const heir = await rollout(n, (pod) => {
      (containerOf(pod).command as string[]).push("--v=2");
    });
    const ID = podId(heir);
    const inactive = join(c.inactiveDir, manifestFileName(ID));
    await runFor(n, POLL_MS);
    const inherited = await readPod(inactive);
    const fetched = hostPathsOf(inherited).find((d) => d.startsWith(c.configmapsDir))!;
    assertEquals(Object.keys(await filesUnder(fetched)), ["policy.yaml"]);
    assertEquals(
      n.log.find("the predecessor has no files for an inherited volume").map((l) => l.fetched),
      [true],
    );
    assertEquals(await promotionTime(n), 60_000, "65 s after the rollout");
    const promoted = await readPod(inactive);
    assert((containerOf(promoted).command as string[]).includes("--v=2"));
    assertIdentity(c, promoted, heir);
    assert(
      hostPathsOf(promoted).filter((d) => d.startsWith(c.secretsDir)).every((d) =>
        d.includes("/_v2/")
      ),
    );
    assertEquals((await versionsView(c, ID, manifestFileName(ID))).versions, [1, 2]);

    // Pinned, the next rollout's pod inherits the pin: its spec waits until unpinned.
    const pin = { pinnedAt: "2026-12-01T10:00:00Z" };
    await Deno.writeTextFile(join(versionsDir(c, ID), "pinned.json"), JSON.stringify(pin));
    const next = await n.node.replaceParent(ID, (pod) => {
      (containerOf(pod).command as string[]).push("--v=3");
      return pod;
    });
    assertEquals(await promotionTime(n), undefined);
    const view = await versionsView(c, podId(next), manifestFileName(podId(next)));
    assertEquals(view.pinned, pin);
    assertEquals(view.inheritedFrom, { id: ID, version: 2 });
    assertEquals(view.candidate?.version, 2);
  });
});
