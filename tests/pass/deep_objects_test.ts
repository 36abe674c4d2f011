/**
 * One object nested deeper than anything recursive can walk (structuredClone, JSON.stringify's
 * slow path, a recursive freeze) is that object's failure, said once, never the pass's: the
 * simulated API server sends it as real JSON, the agent's other checkpoints are written and
 * activated as ever, and later passes are complete.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { manifestFileName } from "../../lib/core/checkpoint_layout.ts";
import type { Pod } from "../../lib/core/pod.ts";
import { controlPlane, daemonSetPod } from "../../lib/sim/control_plane.ts";
import type { SimNodeOptions } from "../../lib/sim/node.ts";
import { type AgentOnNode, withAgentOnNode } from "../helpers/agent_on_node.ts";
import { runCli } from "../helpers/cli.ts";
import { tree } from "../helpers/tree.ts";

const NODE = "cp-1";
const PARENTS = [
  "kube-system/kube-apiserver-7x2kq",
  "kube-system/kube-controller-manager-m4t9z",
  "kube-system/kube-scheduler-q8w2c",
];
const DEEP = "kube-system/deep-d33p1";
const DEPTH = 100_000;

/** `{"1": {"1": … "bottom" …}}`, `depth` objects deep: numeric keys put JSON.stringify on its recursive path. */
function nested(depth: number): unknown {
  let value: unknown = "bottom";
  for (let i = 0; i < depth; i++) value = { "1": value };
  return value;
}

/** A parent like the others, with a field no schema looks into nested `DEPTH` levels. */
function deepParent(): Pod {
  const pod = daemonSetPod({ app: "deep", suffix: "d33p1", nodeName: NODE, command: ["deep"] });
  return { ...pod, spec: { ...pod.spec, overhead: nested(DEPTH) } };
}

function withDeepNode(fn: (n: AgentOnNode) => Promise<void>) {
  const cluster = controlPlane(NODE);
  cluster.pods.push(deepParent());
  const options: SimNodeOptions = { nodeName: NODE, cluster };
  return withAgentOnNode(options, {}, fn);
}

/** The log lines that name `id`, as [level, msg]. */
/** Above debug, where a lasting problem is said again on every pass. */
function linesNaming(n: AgentOnNode, id: string, from = 0): string[][] {
  return n.log.lines.slice(from).filter((l) => l.id === id && l.level !== "debug")
    .map((l) => [l.level, l.msg]);
}

Deno.test("a parent nested 100,000 levels deep is its own failure, said once: the others are written and activated, later passes complete", async () => {
  await withDeepNode(async (n) => {
    const first = await n.pass();
    assertEquals(first.failures, []);
    assertEquals(first.errors, []);
    assertEquals(first.complete, true);
    const c = n.config();
    const inactive = Object.keys(await tree(c.inactiveDir)).filter((f) => !f.startsWith("."));
    assertEquals(inactive.sort(), PARENTS.map(manifestFileName).sort());
    // Said once, naming the parent and where it nests too deep.
    const said = n.log.lines.filter((l) => l.id === DEEP && l.level === "error");
    assertEquals(said.length, 1, JSON.stringify(said));
    assert(String(said[0].error).includes("spec"), JSON.stringify(said[0]));

    for (let i = 0; i < 3; i++) {
      const from = n.log.lines.length;
      const later = await n.pass();
      assertEquals([later.complete, later.errors], [true, []]);
      assertEquals(linesNaming(n, DEEP, from), []);
    }

    // The node's snapshot holds it, and plans as the agent did.
    const snapshot = await runCli(["snapshot", "--config", await n.node.writeConfigFile()]);
    assertEquals(snapshot.code, 0, snapshot.stderr);
    const planned = await runCli(["plan", "--snapshot", "-"], { stdin: snapshot.stdout });
    assertEquals(planned.code, 0, planned.stderr);
    assertEquals(Object.keys(JSON.parse(planned.stdout).state).sort(), [DEEP, ...PARENTS].sort());

    await n.node.loseControlPlane();
    const from = n.log.lines.length;
    const down = await n.pass();
    assertEquals(down.plan.starts, [DEEP, ...PARENTS].sort());
    // Nothing to activate for it: said once already, not an error of every outage pass.
    assertEquals(down.errors, []);
    assertEquals(linesNaming(n, DEEP, from).filter(([level]) => level !== "info"), []);
    assertEquals(
      Object.keys(await tree(c.staticPodDir)).sort(),
      ["etcd.yaml", ...PARENTS.map(manifestFileName)].sort(),
    );
  });
});
