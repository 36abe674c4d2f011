/**
 * A bad rollout of the API server heals itself, on a simulated node whose API server is served
 * only while a kube-apiserver container runs (docs/design.md#crash-loops): the good spec is the
 * kept version; a DaemonSet rollout replaces its pod with one whose container exits at once; the
 * API server goes away. The kept version's copy must take over while the new pod crash-loops,
 * stay while the API server it serves is back and the pod still crash-loops, and go when a good
 * rollout takes over, with the hole no longer than the kubelet's restart back-off.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { manifestFileName } from "../../lib/core/checkpoint_layout.ts";
import { type Pod, podId } from "../../lib/core/pod.ts";
import type { PassReport } from "../../lib/pass/report.ts";
import { pathExists } from "../../lib/disk/dirs.ts";
import { type AgentOnNode, withAgentOnNode } from "../helpers/agent_on_node.ts";
import { containerOf, POLL_MS, readPod } from "../helpers/promotion.ts";

const OLD = "kube-system/kube-apiserver-7x2kq";
const API_SERVER = { "k8s-app": "kube-apiserver" };
const BAD_IMAGE = "registry.k8s.io/kube-apiserver:v1.99.0-typo";

/**
 * Each pass's report for `ms` of both clocks, a pass every poll interval. `kubeletRefuses`: the
 * kubelet refuses the agent while the API server is not served (a kubelet that authorizes
 * through the API server, its cache run out), as the last pass found it.
 */
async function passesFor(
  n: AgentOnNode,
  ms: number,
  kubeletRefuses = false,
): Promise<PassReport[]> {
  const reports: PassReport[] = [];
  for (let at = POLL_MS; at <= ms; at += POLL_MS) {
    n.clock.advance(POLL_MS);
    await n.node.advance(POLL_MS);
    const report = await n.pass();
    assertEquals(report.errors, []);
    reports.push(report);
    if (kubeletRefuses) n.node.kubelet.secure.setFault(served(report) ? "none" : "forbidden");
  }
  return reports;
}

/** Whether the API server answered the pass. */
const served = (report: PassReport) => !report.failures.some((f) => f.source === "apiserver");

/** The longest run of passes the API server did not answer, in milliseconds. */
function longestHoleMs(reports: PassReport[]): number {
  let longest = 0, run = 0;
  for (const report of reports) {
    run = served(report) ? 0 : run + POLL_MS;
    longest = Math.max(longest, run);
  }
  return longest;
}

/** A DaemonSet rollout of `id`'s pod with `change`; the new pod. */
function rollout(n: AgentOnNode, id: string, generation: number, change: (pod: Pod) => void) {
  return n.node.replaceParent(id, (pod) => {
    pod.metadata.labels = { ...pod.metadata.labels, "pod-template-generation": `${generation}` };
    change(pod);
    return pod;
  });
}

for (
  const [kubelet, overrides, refuses] of [
    ["verified", {}, false],
    // kubeadm's default: the kubelet's own certificate, which the cluster CA did not sign. Its
    // answers add no parent, but may say that one the agent keeps a checkpoint of crash-loops.
    ["read unverified", { kubeletCaFile: undefined }, false],
    // A kubelet that authorizes through the API server refuses the agent while it is gone: the
    // runtime alone shows the crash loop.
    ["refusing without the API server", {}, true],
  ] as const
) {
  Deno.test(`a bad rollout of the API server, the kubelet ${kubelet}: the kept version's copy serves while the new pod crash-loops, and a good rollout takes over`, async () => {
    await withAgentOnNode(
      { apiServerLabels: API_SERVER },
      { promoteAfterMs: 60_000, pollIntervalMs: POLL_MS, ...overrides },
      async (n) => {
        const c = n.config();
        assertEquals((await n.pass()).errors, []);
        const goodImage = containerOf(await readPod(join(c.inactiveDir, manifestFileName(OLD))))
          .image;
        n.node.breakImage(BAD_IMAGE);
        const bad = await rollout(n, OLD, 2, (pod) => containerOf(pod).image = BAD_IMAGE);
        const BAD = podId(bad);
        const copyOf = (id: string) => join(c.staticPodDir, manifestFileName(id));

        // The new pod's container exits as it starts, and the API server with it.
        const crashing = await passesFor(n, 90_000, refuses);
        const judged = crashing.findIndex((r) =>
          r.changes.some((ch) => ch.id === BAD && ch.reason === "ParentCrashLooping")
        );
        assert(judged >= 0, "the new pod is judged crash-looping within 90 s");
        const change = crashing[judged].changes.find((ch) => ch.id === BAD)!;
        assertEquals([change.to, change.message], [
          "active",
          "parent crash-looping on an unproven spec: kept version 1 active",
        ]);
        const copy = await readPod(copyOf(BAD));
        assertEquals(containerOf(copy).image, goodImage, "the copy runs the kept version");
        assert(served(crashing.at(-1)!), "the copy serves the API server");

        // The API server is back, served by the copy, and the new pod still crash-loops: the
        // copy stays, and the bad spec is never promoted.
        const serving = await passesFor(n, 300_000, refuses);
        assertEquals(serving.filter((r) => !served(r)).length, 0, "served on every pass");
        assertEquals(serving.flatMap((r) => r.plan.stops), []);
        assertEquals(n.log.find("candidate promoted"), []);
        assert(await pathExists(copyOf(BAD)));

        // The agent restarts (an upgrade, its watchdog) in the middle of it: the copy stays.
        await n.restart();
        const restarted = await passesFor(n, 30_000, refuses);
        assertEquals(restarted.filter((r) => !served(r)).length, 0, "served after the restart");
        assertEquals(restarted.flatMap((r) => r.plan.stops), []);

        // A good rollout (back to the kept spec, through the API the copy serves) takes over.
        const fixed = await rollout(n, BAD, 3, (pod) => containerOf(pod).image = goodImage);
        const FIXED = podId(fixed);
        const after = await passesFor(n, 60_000, refuses);
        assertEquals(await pathExists(copyOf(BAD)), false, "the copy is withdrawn");
        assertEquals(await pathExists(copyOf(FIXED)), false);
        assert(served(after.at(-1)!), "the new pod serves the API server");
        const hole = longestHoleMs(after);
        assert(hole <= 10_000, `no API server for ${hole} ms: more than one restart back-off`);
        assert(
          n.node.events.some((e) => e.pod === FIXED && e.event === "container-running"),
          "the new pod runs",
        );
      },
    );
  });
}
