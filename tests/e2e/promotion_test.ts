/**
 * Promotion by readiness on a simulated node, with the real agent: a parent's new spec whose pod
 * never becomes Ready is never promoted, and after a power cut the copy the kubelet runs is the
 * old, good spec with its own files; a good new spec is promoted once its pod has been Ready for
 * promoteAfter, into a version directory of its own, the old version kept beside it.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { hostPathsOf, versionsDir } from "../../lib/core/checkpoint_layout.ts";
import type { Config } from "../../lib/config/types.ts";
import { pathExists } from "../../lib/disk/dirs.ts";
import { type AgentOnNode, withAgentOnNode } from "../helpers/agent_on_node.ts";
import { containerOf, POLL_MS, promotionTime, readPod, runFor } from "../helpers/promotion.ts";

const ID = "kube-system/kube-controller-manager-m4t9z";
const FILE = "kube-system-kube-controller-manager-m4t9z.json";
/** The agent with promoteAfter 60 s, after the pass that took the first checkpoints. */
function afterFirstPass(
  fn: (n: AgentOnNode, c: Config, inactive: string, first: string) => Promise<void>,
) {
  return withAgentOnNode({}, { promoteAfterMs: 60_000, pollIntervalMs: POLL_MS }, async (n) => {
    const c = n.config();
    const inactive = join(c.inactiveDir, FILE);
    assertEquals((await n.pass()).errors, []);
    await fn(n, c, inactive, await Deno.readTextFile(inactive));
  });
}

Deno.test("a spec that never becomes Ready is never promoted; an outage then runs the old spec", async () => {
  await afterFirstPass(async (n, c, inactive, good) => {
    const goodImage = containerOf(JSON.parse(good)).image;
    const goodFiles = hostPathsOf(JSON.parse(good));

    const badImage = "registry.k8s.io/kube-controller-manager:v1.99.0-typo";
    n.node.breakImage(badImage);
    await n.node.updateParent(ID, (pod) => {
      containerOf(pod).image = badImage;
      return pod;
    });
    await runFor(n, 300_000);

    assertEquals(await Deno.readTextFile(inactive), good, "the kept version stays in place");
    // Crash-looping on an unproven spec, the pod no longer counts as running: the copy of the
    // kept version stands in for it, with the API server up.
    assert(await pathExists(join(c.staticPodDir, FILE)), "the copy stands in");
    // Crash-looping on an unproven spec, the pod no longer counts as running: the copy of the
    // kept version stands in for it, with the API server up.
    assert(await pathExists(join(c.staticPodDir, FILE)), "the copy stands in");
    const candidate = JSON.parse(
      await Deno.readTextFile(join(versionsDir(c, ID), "candidate.json")),
    );
    assertEquals(candidate.version, 2);
    assertEquals(containerOf(candidate.manifest).image, badImage);
    assertEquals(n.log.find("candidate promoted"), []);
    assert(n.log.find("candidate waits; the kept version stays in place").length >= 1);
    for (const dir of goodFiles) assert(await pathExists(dir), dir);

    await n.node.loseControlPlane();
    await runFor(n, 30_000);
    const active = await readPod(join(c.staticPodDir, FILE));
    assertEquals(containerOf(active).image, goodImage);
    assertEquals(hostPathsOf(active), goodFiles);
    const copy = `${ID}-${n.node.nodeName}`;
    assert(
      n.node.events.some((e) => e.pod === copy && e.event === "container-running"),
      "the kubelet runs the copy of the good spec",
    );

    // Back, and the operator fixes the spec: the good change replaces the bad candidate and is
    // promoted once its pod has been Ready for promoteAfter, not before.
    await n.node.restoreControlPlane();
    await runFor(n, 30_000);
    assertEquals(await Deno.readTextFile(inactive), good);
    await n.node.updateParent(ID, (pod) => {
      containerOf(pod).image = goodImage;
      (containerOf(pod).command as string[]).push("--v=2");
      return pod;
    });
    // The copy of the kept version that stood in while the bad spec crash-looped
    // (docs/design.md#crash-loops) goes on the pass that sees the fixed pod's container; its
    // wait for Ready starts on the pass after, the checkpoint no longer active.
    const promotedAtMs = await promotionTime(n);
    assertEquals(promotedAtMs, 75_000);
    const promoted = await readPod(inactive);
    assertEquals(containerOf(promoted).image, goodImage);
    assert((containerOf(promoted).command as string[]).includes("--v=2"));
    // The bad spec never became a version: the good one is version 2.
    assertEquals(JSON.parse(await Deno.readTextFile(join(versionsDir(c, ID), "2.json"))), promoted);
  });
});

Deno.test("a spec Ready for promoteAfter is promoted, into files of its own", async () => {
  await afterFirstPass(async (n, c, inactive, first) => {
    const firstFiles = hostPathsOf(JSON.parse(first));
    const secretDir = firstFiles.find((d) => d.startsWith(c.secretsDir))!;
    const oldKey = await Deno.readTextFile(join(secretDir, "service-account.key"));

    // A new flag and a rotated key: the new spec must never mount the old version's files,
    // nor the old version the new key.
    n.node.apiServer.setSecret("kube-system", "kube-controller-manager", {
      "ca.crt": "new ca\n",
      "service-account.key": "new key\n",
    });
    await n.node.updateParent(ID, (pod) => {
      (containerOf(pod).command as string[]).push("--v=2");
      return pod;
    });
    const promotedAtMs = await promotionTime(n);
    // Ready within the kubelet's first second, so promoted on the first pass 60 s after that.
    assertEquals(promotedAtMs, 65_000);
    const promoted = await readPod(inactive);
    assert((containerOf(promoted).command as string[]).includes("--v=2"));
    const newFiles = hostPathsOf(promoted).filter((d) => d.startsWith(c.secretsDir));
    assert(newFiles.every((d) => d.includes("/_v2/")), JSON.stringify(newFiles));
    const newSecretDir = newFiles.find((d) => d.startsWith(c.secretsDir))!;
    assertEquals(await Deno.readTextFile(join(newSecretDir, "service-account.key")), "new key\n");
    // The first version is kept, whole, with the files it had.
    assertEquals(await Deno.readTextFile(join(versionsDir(c, ID), "1.json")), first);
    assertEquals(await Deno.readTextFile(join(secretDir, "service-account.key")), oldKey);
    assertEquals(await pathExists(join(versionsDir(c, ID), "candidate.json")), false);
  });
});

Deno.test("the wait survives an agent restarted at once, and starts over after one stopped for long", async () => {
  await afterFirstPass(async (n, _c, inactive) => {
    const change = (flag: string) =>
      n.node.updateParent(ID, (pod) => {
        (containerOf(pod).command as string[]).push(flag);
        return pod;
      });
    await change("--v=2");
    await runFor(n, 30_000);
    await n.restart();
    // The candidate's wait is on disk: the new agent goes on with it.
    assertEquals(await promotionTime(n), 35_000, "65 s after the change, as without a restart");
    assert((containerOf(await readPod(inactive)).command as string[]).includes("--v=2"));

    await change("--v=3");
    await runFor(n, 30_000);
    // Stopped for 20 s, longer than three poll intervals: nobody saw the pod in between.
    n.clock.advance(20_000);
    await n.node.advance(20_000);
    await n.restart();
    assertEquals(await promotionTime(n), 65_000, "60 s after the first pass that saw it again");
  });
});
