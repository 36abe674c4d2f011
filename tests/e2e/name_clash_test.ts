/**
 * Two parents whose bootkube manifest names coincide (`kube-system/proxy-x1` and
 * `kube/system-proxy-x1` are both `kube-system-proxy-x1.json`), through real passes on a
 * simulated node: both checkpoints are written, neither overwrites the other, both activate on an
 * outage and are withdrawn after, and no name ever changes — across passes, agent restarts and
 * `--once` processes — whichever parent the agent met first.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import type { PassReport } from "../../lib/pass/report.ts";
import { checksFor, runChecks } from "../../lib/verify/verify.ts";
import { type Pod, podId } from "../../lib/core/pod.ts";
import { type ControlPlane, daemonSetPod } from "../../lib/sim/control_plane.ts";
import { type AgentOnNode, withAgentOnNode } from "../helpers/agent_on_node.ts";
import { runCli } from "../helpers/cli.ts";
import { manifestTree, tree } from "../helpers/tree.ts";

const A = "kube-system/proxy-x1";
const B = "kube/system-proxy-x1";
const BOOTKUBE = "kube-system-proxy-x1.json";
const A_OWN = "kube-system_proxy-x1.json";
const B_OWN = "kube_system-proxy-x1.json";
const CLASH_LOG = "manifest file name taken: the checkpoint gets a name of its own";

const CA = "-----BEGIN CERTIFICATE-----\nY2E=\n-----END CERTIFICATE-----\n";

/** Two parents with clashing manifest names, each with a secret of its own namespace. */
function clashingCluster(nodeName: string, bFirst: boolean): ControlPlane {
  const a = daemonSetPod({
    app: "proxy",
    suffix: "x1",
    nodeName,
    secret: "proxy",
    command: ["proxy", "--cluster=a"],
  });
  const b = structuredClone(a);
  b.metadata.namespace = "kube";
  b.metadata.name = "system-proxy-x1";
  b.metadata.uid = "0b0b0b0b-0000-4000-8000-00000000000b";
  (b.spec as { containers: { command: string[] }[] }).containers[0].command = [
    "proxy",
    "--cluster=b",
  ];
  return {
    pods: bFirst ? [b, a] : [a, b],
    secrets: [
      { namespace: "kube-system", name: "proxy", data: { token: "token of kube-system" } },
      { namespace: "kube", name: "proxy", data: { token: "token of kube" } },
    ],
    configMaps: ["kube-system", "kube"].map((namespace) => ({
      namespace,
      name: "kube-root-ca.crt",
      data: { "ca.crt": CA },
    })),
    staticManifests: [],
  };
}

/** The id of the checkpoint in each file of a manifest dir. */
async function holders(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [file, entry] of Object.entries(await manifestTree(dir))) {
    out[file] = podId(JSON.parse(entry.content!) as Pod);
  }
  return out;
}

/** Parents of both namespaces are checkpointed: the operator listed them. */
const NAMESPACES = ["kube", "kube-system"];

function withClashNode(bFirstInLists: boolean, fn: (n: AgentOnNode) => Promise<void>) {
  return withAgentOnNode(
    { cluster: clashingCluster("cp-1", bFirstInLists) },
    { namespaces: NAMESPACES },
    fn,
  );
}

/** Both checkpoints under `names`, each its own parent's, with its own stored secret. */
async function assertBothCheckpoints(n: AgentOnNode, names: Record<string, string>) {
  const c = n.config();
  const expected = Object.fromEntries(Object.entries(names).map(([id, file]) => [file, id]));
  assertEquals(await holders(c.inactiveDir), expected);
  const inactive = await tree(c.inactiveDir);
  assert(inactive[names[A]].content!.includes("--cluster=a"));
  assert(inactive[names[B]].content!.includes("--cluster=b"));
  const token = (id: string) => join(c.secretsDir, id, "proxy", "token");
  assertEquals(await Deno.readTextFile(token(A)), "token of kube-system");
  assertEquals(await Deno.readTextFile(token(B)), "token of kube");
}

const NAMES_A_FIRST = { [A]: BOOTKUBE, [B]: B_OWN };
const NAMES_B_FIRST = { [A]: A_OWN, [B]: BOOTKUBE };

/**
 * The agent meets the parents as `meet` says, then both: the checkpoints are written under
 * `names`, survive 10 passes, a restart, an outage and its end with their names unchanged.
 */
async function scenario(
  meet: { first?: string; bFirstInLists?: boolean },
  names: Record<string, string>,
) {
  await withClashNode(meet.bFirstInLists ?? false, async (n) => {
    if (meet.first) {
      await n.restart({ namespaces: [meet.first.split("/")[0]] });
      for (let i = 0; i < 2; i++) assertEquals((await n.pass()).errors, []);
      await n.restart();
    }
    const first = await n.pass();
    assertEquals(first.errors, []);
    await assertBothCheckpoints(n, names);
    // The one that did not get bootkube's name is said once, with why.
    const [clashed] = Object.entries(names).filter(([, file]) => file !== BOOTKUBE);
    const said = n.log.find(CLASH_LOG);
    assertEquals(said.map((l) => [l.id, l.file]), [clashed]);
    assert(String(said[0].reason).startsWith(`${BOOTKUBE} is held by the checkpoint of `));
    // The admin endpoint's views show the names the files have.
    const { agent } = await n.daemon();
    for (const [id, file] of Object.entries(names)) assertEquals(agent.manifestFileOf(id), file);

    const c = n.config();
    const settled = await tree(c.inactiveDir, { stamps: true });
    for (let i = 0; i < 10; i++) {
      const report = await n.pass();
      assertEquals([report.errors, report.applied], [[], []]);
    }
    assertEquals(await tree(c.inactiveDir, { stamps: true }), settled);

    await n.restart();
    assertEquals((await n.pass()).errors, []);
    await assertBothCheckpoints(n, names);

    await n.node.loseControlPlane();
    const down = await n.pass();
    assertEquals([down.plan.starts, down.errors], [[A, B], []]);
    assertEquals(await holders(c.staticPodDir), await holders(c.inactiveDir));
    // The kubelet runs both copies.
    await n.restart();
    assertEquals((await n.pass()).errors, []);
    assertEquals(await holders(c.staticPodDir), await holders(c.inactiveDir));

    await n.node.restoreControlPlane();
    const back = await n.pass();
    assertEquals([back.plan.stops, back.errors], [[A, B], []]);
    assertEquals(await holders(c.staticPodDir), {});
    await assertBothCheckpoints(n, names);
    assertEquals(n.log.find(CLASH_LOG).length, 1);
    assertEquals((await runChecks(c.stateDir, checksFor(c))).findings, []);
  });
}

Deno.test("name clash: two parents met together: bootkube's name to the first in id order", async () => {
  await scenario({}, NAMES_A_FIRST);
});

Deno.test("name clash: the same whichever order the sources list them in", async () => {
  await scenario({ bFirstInLists: true }, NAMES_A_FIRST);
});

Deno.test("name clash: kube-system/proxy-x1 met first keeps bootkube's name", async () => {
  await scenario({ first: A }, NAMES_A_FIRST);
});

Deno.test("name clash: kube/system-proxy-x1 met first keeps bootkube's name", async () => {
  await scenario({ first: B }, NAMES_B_FIRST);
});

Deno.test("name clash: through ckpt-agent --once, one process per pass", async () => {
  await withClashNode(false, async (n) => {
    const configFile = await n.node.writeConfigFile({ namespaces: NAMESPACES });
    const once = async () => {
      const r = await runCli(["--once", "--config", configFile, "--output", "json"]);
      return { ...r, report: JSON.parse(r.stdout) as PassReport };
    };
    const first = await once();
    assertEquals([first.code, first.report.errors], [0, []]);
    assertEquals(
      first.stderr.split("\n").filter((l) => l.includes(CLASH_LOG)).map((l) => JSON.parse(l).id),
      [B],
    );
    await assertBothCheckpoints(n, NAMES_A_FIRST);
    for (let i = 0; i < 3; i++) {
      const r = await once();
      assertEquals([r.code, r.report.errors, r.report.applied], [0, [], []]);
      assert(!r.stderr.includes(CLASH_LOG), r.stderr);
    }
    await n.node.loseControlPlane();
    const down = await once();
    assertEquals([down.report.plan.starts, down.report.errors], [[A, B], []]);
    const c = n.config();
    assertEquals(await holders(c.staticPodDir), { [BOOTKUBE]: A, [B_OWN]: B });
    await n.node.restoreControlPlane();
    const back = await once();
    assertEquals([back.code, back.report.plan.stops], [0, [A, B]]);
    assertEquals(await holders(c.staticPodDir), {});
    const verify = await runCli(["verify", "--config", configFile]);
    assertEquals(verify.code, 0, verify.stdout);
    // With no agent running, status shows the names the files have on disk.
    const status = await runCli(["status", "--config", configFile, "--output", "json"]);
    const listed = JSON.parse(status.stdout) as {
      source: string;
      checkpoints: { id: string; paths: { inactiveManifest: string } }[];
    };
    assertEquals(listed.source, "state-dir");
    assertEquals(
      listed.checkpoints.map((v) => [v.id, v.paths.inactiveManifest]),
      [[A, join(c.inactiveDir, BOOTKUBE)], [B, join(c.inactiveDir, B_OWN)]],
    );
  });
});

Deno.test("name clash: verify names misnamed, duplicate and renamed manifests; a pass mends the active one", async () => {
  await withClashNode(false, async (n) => {
    const c = n.config();
    await n.pass();
    await n.node.loseControlPlane();
    await n.pass();
    assertEquals((await runChecks(c.stateDir, checksFor(c))).findings, []);

    // A's active copy moved to its other name; a copy of B's inactive manifest under a name
    // that is none of B's.
    await Deno.rename(join(c.staticPodDir, BOOTKUBE), join(c.staticPodDir, A_OWN));
    await Deno.copyFile(join(c.inactiveDir, B_OWN), join(c.inactiveDir, "proxy.json"));
    const problems = async () =>
      (await runChecks(c.stateDir, checksFor(c))).findings.map((f) => [f.file, f.problem]).sort();
    const copy = join(c.inactiveDir, "proxy.json");
    assertEquals(await problems(), [
      [copy, `holds ${B}, as ${B_OWN} in the same directory does`],
      [copy, `named neither ${BOOTKUBE} nor ${B_OWN}, the names of its pod ${B}`],
      [join(c.staticPodDir, A_OWN), `named otherwise than ${join(c.inactiveDir, BOOTKUBE)}`],
    ]);

    // The next pass activates A under its name and withdraws the copy under the other one.
    const mended = await n.pass();
    assertEquals(mended.errors, []);
    assertEquals(await holders(c.staticPodDir), { [BOOTKUBE]: A, [B_OWN]: B });
    assertEquals((await problems()).map(([file]) => file), [copy, copy]);
  });
});
