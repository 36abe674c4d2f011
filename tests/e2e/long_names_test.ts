/**
 * A parent with the longest names Kubernetes allows — a 253-character pod name in a 63-character
 * namespace, mounting a secret and a configmap of 253-character names — through `ckpt-agent
 * --once` on a simulated node: its checkpoint is written under names the file system takes, its
 * files are stored, it is activated in an outage under a name the kubelet accepts (and the
 * simulated kubelet, which refuses what a real one refuses, runs it), withdrawn when the parent
 * is back, and its status record says its full id; every `--once` exits 0 but during the outage.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { CHECKPOINT_OF_ANNOTATION, type Pod, podId } from "../../lib/core/pod.ts";
import type { PassReport } from "../../lib/pass/report.ts";
import { controlPlane, daemonSetPod } from "../../lib/sim/control_plane.ts";
import { SimNode } from "../../lib/sim/node.ts";
import { runCli } from "../helpers/cli.ts";
import { manifestTree, tree } from "../helpers/tree.ts";

const NODE = "cp-1";
const NS = `tenant-${"n".repeat(50)}-long1`; // 63 characters
const APP = `long-named-component-${"abcdefghij".repeat(23)}`.slice(0, 247);
const NAME = `${APP}-z9k4q`; // 253 characters
const ID = `${NS}/${NAME}`;
const SECRET = `secret.${"s".repeat(246)}`; // 253 characters
const CONFIG = `config.${"c".repeat(246)}`;
const CA = "-----BEGIN CERTIFICATE-----\nY2E=\n-----END CERTIFICATE-----\n";

/** The usual control plane, and the long-named parent with its objects in its namespace. */
function cluster() {
  const plane = controlPlane(NODE);
  const pod = daemonSetPod({
    app: APP,
    suffix: "z9k4q",
    nodeName: NODE,
    secret: SECRET,
    configMap: { name: CONFIG, key: "config.yaml", mountPath: "/etc/long/config" },
    command: ["/usr/local/bin/long", "--config=/etc/long/config/config.yaml"],
  });
  pod.metadata.namespace = NS;
  // Label values are at most 63 characters: the API server would refuse the DaemonSet's.
  pod.metadata.labels = { "k8s-app": "long-named-component", tier: "control-plane" };
  plane.pods.push(pod);
  plane.secrets.push({ namespace: NS, name: SECRET, data: { token: "long token" } });
  plane.configMaps.push(
    { namespace: NS, name: CONFIG, data: { "config.yaml": "long: true\n" } },
    { namespace: NS, name: "kube-root-ca.crt", data: { "ca.crt": CA } },
  );
  return plane;
}

async function once(config: string) {
  const r = await runCli(["--once", "--config", config, "--output", "json"]);
  assert(r.stdout.trim() !== "", `no report; exit ${r.code}; stderr: ${r.stderr}`);
  return { code: r.code, report: JSON.parse(r.stdout) as PassReport, stderr: r.stderr };
}

/** Every name in `dir`'s tree that is longer than a file system takes. */
async function tooLong(dir: string): Promise<string[]> {
  return Object.keys(await tree(dir)).filter((path) =>
    path.split("/").some((segment) => new TextEncoder().encode(segment).length > 255)
  );
}

Deno.test("a 253-character pod name in a 63-character namespace: checkpointed, activated, withdrawn", async () => {
  assertEquals([NS.length, NAME.length, SECRET.length, CONFIG.length], [63, 253, 253, 253]);
  const node = await SimNode.start({ nodeName: NODE, cluster: cluster() });
  try {
    const config = await node.writeConfigFile({ namespaces: ["kube-system", NS] });
    const c = node.config();

    const first = await once(config);
    assertEquals([first.code, first.report.errors], [0, []], first.stderr);
    assert(first.report.plan.stops.includes(ID), JSON.stringify(first.report.plan));
    for (const dir of [c.inactiveDir, c.secretsDir, c.configmapsDir, c.stateDir]) {
      assertEquals(await tooLong(dir), [], dir);
    }
    // One manifest for it, named within NAME_MAX, saying which parent it is a copy of.
    const inactive = Object.entries(await manifestTree(c.inactiveDir)).filter(([, entry]) =>
      (JSON.parse(entry.content!) as Pod).metadata.namespace === NS
    );
    assertEquals(inactive.length, 1);
    const [file, entry] = inactive[0];
    const manifest = JSON.parse(entry.content!) as Pod;
    assertEquals(manifest.metadata.annotations?.[CHECKPOINT_OF_ANNOTATION], NAME);
    // The kubelet names the copy `<name>-<node>` and refuses a name over 253 characters.
    const copyName = manifest.metadata.name;
    assert(copyName !== NAME && `${copyName}-${NODE}`.length <= 253, copyName);
    const copy = `${NS}/${copyName}-${NODE}`;
    // Its stored files, under the parent's own names.
    const secrets = await tree(join(c.secretsDir, NS, NAME));
    assertEquals(secrets[`${SECRET}/token`]?.content, "long token");
    const configmaps = await tree(join(c.configmapsDir, NS, NAME));
    assertEquals(configmaps["_volumes/config/config.yaml"]?.content, "long: true\n");
    // Its status record says its full id.
    const records = Object.values(await tree(join(c.stateDir, "status")))
      .map((e) => JSON.parse(e.content!).data);
    assertEquals(records.filter((r) => r.id === ID).map((r) => r.state), ["inactive"]);

    await node.loseControlPlane();
    const down = await once(config);
    assertEquals(down.report.errors, [], down.stderr);
    assert(down.report.plan.starts.includes(ID), JSON.stringify(down.report.plan));
    assert(Object.keys(await tree(c.staticPodDir)).includes(file));
    await node.advance(2_000);
    assertEquals(node.kubeletLog, []);
    const events = node.events.filter((e) => e.pod === copy).map((e) => e.event);
    assert(events.includes("container-running"), `${copy}: ${events.join(", ")}`);
    // The agent finds the running copy where the kubelet runs it: it records its sandbox.
    const recorded = await once(config);
    assertEquals(recorded.report.errors, [], recorded.stderr);
    assert(
      recorded.report.applied.some((a) => a.op === "sandbox-record" && a.detail === copy),
      JSON.stringify(recorded.report.applied),
    );

    await node.restoreControlPlane();
    const back = await once(config);
    assertEquals([back.code, back.report.errors], [0, []], back.stderr);
    assert(back.report.plan.stops.includes(ID), JSON.stringify(back.report.plan));
    assert(!Object.keys(await tree(c.staticPodDir)).includes(file));
    const after = Object.values(await tree(join(c.stateDir, "status")))
      .map((e) => JSON.parse(e.content!).data).find((r) => r.id === ID);
    assertEquals(after.state, "inactive");
    assert(after.lastActivatedAt && after.lastDeactivatedAt, JSON.stringify(after));
    assertEquals(podId(node.parents.find((p) => p.metadata.namespace === NS)!), ID);

    const verify = await runCli(["verify", "--config", config, "--json"]);
    assertEquals([verify.code, JSON.parse(verify.stdout).findings], [0, []], verify.stderr);
    assertEquals((await once(config)).code, 0);
  } finally {
    await node.close();
  }
});
