/**
 * Only a verified kubelet can introduce a parent (docs/design.md#trust), through
 * `ckpt-agent --once`: during an outage, whatever answers at the kubelet's port lists a parent
 * the agent never saw. Read over TLS without verifying the certificate (it is not signed by the
 * cluster CA: a local user who bound the port while the kubelet restarted), or from the plain
 * HTTP read-only port, it becomes no checkpoint and nothing is activated for it; the checkpoints
 * the agent already has are activated as ever. A kubelet verified with kubeletCaFile still
 * introduces parents during an outage.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import type { Config } from "../../lib/config/types.ts";
import { manifestFileName } from "../../lib/core/checkpoint_layout.ts";
import type { Pod } from "../../lib/core/pod.ts";
import type { PassReport } from "../../lib/pass/report.ts";
import { SimNode, type SimNodeOptions } from "../../lib/sim/node.ts";
import { runCli } from "../helpers/cli.ts";
import { parent } from "../helpers/pods.ts";
import { tree } from "../helpers/tree.ts";

const PARENTS = [
  "kube-system/kube-apiserver-7x2kq",
  "kube-system/kube-controller-manager-m4t9z",
  "kube-system/kube-scheduler-q8w2c",
];
const INTRUDER = "kube-system/intruder";

/** A privileged pod on the host, as whoever holds the kubelet's port would list it. */
function intruder(nodeName: string): Pod {
  const pod = parent(INTRUDER);
  return {
    ...pod,
    spec: {
      nodeName,
      hostNetwork: true,
      hostPID: true,
      containers: [{
        name: "root",
        image: "docker.io/library/busybox:1.37",
        securityContext: { privileged: true },
        volumeMounts: [{ name: "host", mountPath: "/host" }],
      }],
      volumes: [{ name: "host", hostPath: { path: "/" } }],
    },
  };
}

async function withNode(options: SimNodeOptions, fn: (node: SimNode) => Promise<void>) {
  const node = await SimNode.start(options);
  try {
    await fn(node);
  } finally {
    await node.close();
  }
}

async function once(node: SimNode, overrides: Partial<Config>) {
  const config = await node.writeConfigFile(overrides);
  const r = await runCli(["--once", "--config", config, "--output", "json"]);
  assert(r.stdout.trim() !== "", `no report; exit ${r.code}; stderr: ${r.stderr}`);
  const log = r.stderr.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
  return { report: JSON.parse(r.stdout) as PassReport, log };
}

/** The intruder's files in the manifest dirs and the stored files' dirs. */
async function intruderFiles(node: SimNode): Promise<string[]> {
  const c = node.config();
  const found: string[] = [];
  for (const dir of [c.staticPodDir, c.inactiveDir, c.secretsDir, c.configmapsDir]) {
    for (const path of Object.keys(await tree(dir))) {
      if (path.includes("intruder")) found.push(`${dir}/${path}`);
    }
  }
  return found;
}

/**
 * A first pass with the API server up, then an outage in which the kubelet's port lists the
 * intruder beside nothing else (the kubelet, restarted, holds no pod yet), answering on the
 * secure port unless `secure` is false (the real kubelet then refuses: the read-only port says it).
 */
async function outageWithIntruder(node: SimNode, overrides: Partial<Config>, secure = true) {
  const first = await once(node, overrides);
  assertEquals(first.report.plan.stops, PARENTS);
  await node.loseControlPlane();
  node.kubelet.setPods([intruder(node.nodeName)]);
  if (secure) node.kubelet.secure.setFault("none");
  return await once(node, overrides);
}

Deno.test("a kubelet whose certificate the cluster CA did not sign lists a parent during an outage: no checkpoint, nothing activated", async () => {
  await withNode({}, async (node) => {
    // Unset: verified with the cluster CA, which did not sign the kubelet's own certificate.
    const { report, log } = await outageWithIntruder(node, { kubeletCaFile: undefined });
    assertEquals(report.failures.map((f) => f.source), ["apiserver"]);
    assertEquals(report.plan.starts, PARENTS);
    assertEquals(Object.keys(report.plan.state).sort(), PARENTS);
    assertEquals(await intruderFiles(node), []);
    assertEquals(
      Object.keys(await tree(node.config().staticPodDir)).sort(),
      ["etcd.yaml", ...PARENTS.map(manifestFileName)].sort(),
    );
    const said = log.filter((l) => l.msg.includes("asked unverified"));
    assertEquals(said.length, 1, JSON.stringify(log));
    assertEquals(said[0].level, "warn");
    assert(said[0].msg.includes("its answers add no parent"), said[0].msg);
  });
});

Deno.test("the read-only port lists a parent during an outage: no checkpoint, nothing activated", async () => {
  await withNode({ kubeletReadonlyPort: true }, async (node) => {
    const { report, log } = await outageWithIntruder(node, {}, false);
    assertEquals(node.kubelet.readonly!.requestCount("/pods"), 1);
    assertEquals(report.plan.starts, PARENTS);
    assertEquals(Object.keys(report.plan.state).sort(), PARENTS);
    assertEquals(await intruderFiles(node), []);
    assert(log.some((l) => l.msg.includes("read-only port") && l.msg.includes("add no parent")));
  });
});

Deno.test("a kubelet verified with kubeletCaFile still introduces parents during an outage", async () => {
  await withNode({}, async (node) => {
    const { report } = await outageWithIntruder(node, {});
    assertEquals(report.plan.starts, [INTRUDER, ...PARENTS].sort());
    assertEquals(report.errors, []);
    const c = node.config();
    const files = await intruderFiles(node);
    for (const dir of [c.inactiveDir, c.staticPodDir]) {
      assert(files.includes(`${dir}/${manifestFileName(INTRUDER)}`), `${dir}: ${files}`);
    }
  });
});
