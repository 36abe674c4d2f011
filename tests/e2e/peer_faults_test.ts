/**
 * `ckpt-agent --once` against a simulated node whose peers lie or fall silent: an API server
 * answering 200 with what is not a pod list is an outage, never "no pods"; a hung API server or
 * kubelet holds the pass no longer than its timeout, with the default settings, and the
 * checkpoint of a stopped parent is activated all the same.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { parse as parseYaml, stringify as toYaml } from "yaml";
import type { PassReport } from "../../lib/pass/report.ts";
import { manifestFileName as manifestName } from "../../lib/core/checkpoint_layout.ts";
import type { SimNode } from "../../lib/sim/node.ts";
import { runCli } from "../helpers/cli.ts";
import { withNode } from "../helpers/sim_node.ts";
import { manifestTree } from "../helpers/tree.ts";

const APISERVER = "kube-system/kube-apiserver-7x2kq";
const PARENTS = [
  APISERVER,
  "kube-system/kube-controller-manager-m4t9z",
  "kube-system/kube-scheduler-q8w2c",
];

async function once(configFile: string, ...flags: string[]) {
  const r = await runCli(["--once", "--config", configFile, "--output", "json", ...flags]);
  assert(r.stdout.trim() !== "", `no report; exit ${r.code}; stderr: ${r.stderr}`);
  return { code: r.code, report: JSON.parse(r.stdout) as PassReport, stderr: r.stderr };
}

/** The manifests of a manifest dir, as the kubelet reads it. */
async function files(dir: string): Promise<string[]> {
  return Object.keys(await manifestTree(dir)).sort();
}

for (const fault of ["html", "truncated", "wrong-kind"] as const) {
  Deno.test(`an API server answering ${fault}: degraded, nothing removed, the stopped parent's copy activated`, async () => {
    await withNode(async (node, configFile) => {
      const first = await once(configFile);
      assertEquals(first.code, 0, first.stderr);
      node.apiServer.setFault(fault);
      // Twice with no grace period: had the answer been "no pods", the second pass would remove
      // every checkpoint.
      for (let pass = 0; pass < 2; pass++) {
        const r = await once(configFile, "--checkpoint-grace-period", "0");
        assertEquals(r.code, 1);
        assertEquals(r.report.failures.map((f) => [f.source, f.kind]), [
          ["apiserver", "bad-response"],
        ]);
        assertEquals(r.report.plan.removes, []);
        assertEquals(await files(node.config().inactiveDir), PARENTS.map(manifestName).sort());
        for (const id of PARENTS) assertEquals(r.report.plan.state[id], { state: "inactive" });
      }
      // The node reboots behind the load balancer: nothing runs, and the answers stay bad.
      await node.loseControlPlane("etcd-gone");
      node.apiServer.setFault(fault);
      const stopped = await once(configFile, "--checkpoint-grace-period", "0");
      assertEquals(stopped.report.plan.starts, PARENTS);
      const active = await files(node.config().staticPodDir);
      for (const id of PARENTS) assert(active.includes(manifestName(id)), id);
    });
  });
}

/** The node's config file without the timeouts, so that the defaults apply. */
async function withDefaultTimeouts(configFile: string): Promise<string> {
  const settings = parseYaml(await Deno.readTextFile(configFile));
  delete settings.apiTimeout;
  delete settings.kubeletTimeout;
  const file = join(configFile, "../default-timeouts.yaml");
  await Deno.writeTextFile(file, toYaml(settings));
  return file;
}

async function hungPass(node: SimNode, configFile: string, hang: ("api" | "kubelet")[]) {
  assertEquals((await once(configFile)).code, 0);
  // The node reboots; its API server answers 500 (etcd is gone) and the kubelet 403, unless hung.
  await node.loseControlPlane("etcd-gone");
  if (hang.includes("api")) node.apiServer.setFault("hang");
  if (hang.includes("kubelet")) node.kubelet.secure.setFault("hang");
  const r = await once(await withDefaultTimeouts(configFile));
  assertEquals(r.code, 1);
  const timedOut = r.report.failures.filter((f) => f.kind === "timeout").map((f) => f.source);
  assertEquals(timedOut.sort(), hang.map((peer) => peer === "api" ? "apiserver" : "kubelet"));
  assertEquals(r.report.plan.starts, PARENTS);
  const active = await files(node.config().staticPodDir);
  for (const id of PARENTS) assert(active.includes(manifestName(id)), id);
}

// Each pass waits out a default timeout (10 s for the API server, 5 s for the kubelet): the three
// run side by side.
Deno.test("a hung API server, a hung kubelet, or both: with the default timeouts the pass ends and activates", async () => {
  await Promise.all([
    withNode((node, configFile) => hungPass(node, configFile, ["api"])),
    withNode((node, configFile) => hungPass(node, configFile, ["kubelet"])),
    withNode((node, configFile) => hungPass(node, configFile, ["api", "kubelet"])),
  ]);
});
