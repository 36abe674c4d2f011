/**
 * `ckpt-agent verify` names a checkpoint that declares host ports, in the inactive and the
 * static-pod dir: an older version wrote them, and while such a copy runs the kubelet refuses the
 * parent. The agent's own copies declare none.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { join } from "node:path";
import { type Pod, podId } from "../../lib/core/pod.ts";
import { runCli } from "../helpers/cli.ts";
import { restoreParentPorts } from "../helpers/old_checkpoints.ts";
import { withNode } from "../helpers/sim_node.ts";

const APISERVER = "kube-system/kube-apiserver-7x2kq";
const SCHEDULER = "kube-system/kube-scheduler-q8w2c";
const REFUSED = "while this checkpoint runs, the kubelet refuses its parent (NodePorts)";

Deno.test("verify: a checkpoint declaring host ports is named, with its container, active or not", async () => {
  await withNode(async (node, config) => {
    const verify = async () => {
      const r = await runCli(["verify", "--config", config, "--json"]);
      return { code: r.code, findings: JSON.parse(r.stdout).findings };
    };
    await runCli(["--once", "--config", config]);
    await node.loseControlPlane();
    await runCli(["--once", "--config", config]);
    assertEquals(await verify(), { code: 0, findings: [] });

    const c = node.config();
    const file = (id: string) => `${id.replace("/", "-")}.json`;
    const parent = (id: string) => node.parents.find((p) => podId(p) === id) as Pod;
    for (const dir of [c.inactiveDir, c.staticPodDir]) {
      for (const id of [APISERVER, SCHEDULER]) {
        await restoreParentPorts(join(dir, file(id)), parent(id));
      }
    }
    // On the host network a port without hostPort is a host port all the same.
    const apiserver = `container kube-apiserver declares host port 6443/TCP: ${REFUSED}`;
    const scheduler = `container kube-scheduler declares host port 10259/TCP: ${REFUSED}`;
    assertEquals(await verify(), {
      code: 1,
      findings: [
        { file: join(c.inactiveDir, file(APISERVER)), problem: apiserver },
        { file: join(c.inactiveDir, file(SCHEDULER)), problem: scheduler },
        { file: join(c.staticPodDir, file(APISERVER)), problem: apiserver },
        { file: join(c.staticPodDir, file(SCHEDULER)), problem: scheduler },
      ],
    });
  });
});
