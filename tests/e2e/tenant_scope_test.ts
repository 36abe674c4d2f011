/**
 * Who can make a parent (docs/design.md#trust), through `ckpt-agent --once` as a runbook runs it:
 * a tenant who can only create pods in its own namespace binds an annotated pod to the
 * control-plane node (`spec.nodeName` skips the scheduler and its taint) with a nodeSelector the
 * node does not match, so the kubelet rejects it and it "does not run". With the default
 * `namespace`, it never becomes a checkpoint, the API server up or down; a checkpoint of it left
 * by an earlier configuration is withdrawn and removed, said once.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import type { Config } from "../../lib/config/types.ts";
import { manifestFileName } from "../../lib/core/checkpoint_layout.ts";
import { CHECKPOINT_ANNOTATION, type Pod } from "../../lib/core/pod.ts";
import { controlPlane } from "../../lib/sim/control_plane.ts";
import { SimNode } from "../../lib/sim/node.ts";
import type { PassReport } from "../../lib/pass/report.ts";
import { runCli } from "../helpers/cli.ts";
import { tree } from "../helpers/tree.ts";

const NODE = "cp-1";
const TENANT = "tenant/escalate";
const PARENTS = [
  "kube-system/kube-apiserver-7x2kq",
  "kube-system/kube-controller-manager-m4t9z",
  "kube-system/kube-scheduler-q8w2c",
];

/** What a tenant with the right to create pods in its namespace can make. */
function tenantPod(): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      namespace: "tenant",
      name: "escalate",
      uid: "5f0c2a4e-0000-4000-8000-00000000e5c1",
      annotations: { [CHECKPOINT_ANNOTATION]: "true" },
    },
    spec: {
      nodeName: NODE,
      // Matched by no node: the kubelet rejects the pod (NodeAffinity), so it never runs.
      nodeSelector: { "example.com/no-such-node": "true" },
      hostNetwork: true,
      hostPID: true,
      containers: [{
        name: "root",
        image: "docker.io/library/busybox:1.37",
        command: ["chroot", "/host", "sh"],
        securityContext: { privileged: true },
        volumeMounts: [
          { name: "host", mountPath: "/host" },
          { name: "token", mountPath: "/var/run/token" },
        ],
      }],
      volumes: [
        { name: "host", hostPath: { path: "/" } },
        { name: "token", secret: { secretName: "token" } },
      ],
    },
  };
}

async function withTenantNode(fn: (node: SimNode) => Promise<void>) {
  const cluster = controlPlane(NODE);
  cluster.pods.push(tenantPod());
  cluster.secrets.push({ namespace: "tenant", name: "token", data: { token: "tenant's" } });
  const node = await SimNode.start({ nodeName: NODE, cluster });
  try {
    await fn(node);
  } finally {
    await node.close();
  }
}

async function once(node: SimNode, overrides: Partial<Config> = {}) {
  const config = await node.writeConfigFile(overrides);
  const r = await runCli(["--once", "--config", config, "--output", "json"]);
  assert(r.stdout.trim() !== "", `no report; exit ${r.code}; stderr: ${r.stderr}`);
  const log = r.stderr.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
  return { code: r.code, report: JSON.parse(r.stdout) as PassReport, log };
}

/** Every file of the tenant's checkpoint that any of the agent's directories holds. */
async function tenantFiles(node: SimNode): Promise<string[]> {
  const c = node.config();
  const found: string[] = [];
  for (const dir of [c.staticPodDir, c.inactiveDir, c.secretsDir, c.configmapsDir, c.stateDir]) {
    for (const path of Object.keys(await tree(dir))) {
      if (path.includes("tenant") || path.includes("escalate")) found.push(join(dir, path));
    }
  }
  return found;
}

Deno.test("a tenant's annotated pod bound to the node is no parent by default, the API server up or down", async () => {
  await withTenantNode(async (node) => {
    const up = await once(node);
    assertEquals(up.code, 0, JSON.stringify(up.log));
    assertEquals(Object.keys(up.report.plan.state).sort(), PARENTS);
    assertEquals(await tenantFiles(node), []);
    // The kubelet did refuse it: with any namespace a parent, it would be "not running".
    assert(node.events.some((e) => e.pod === TENANT && e.event === "rejected"));

    await node.loseControlPlane();
    const down = await once(node);
    assertEquals(down.report.plan.starts, PARENTS);
    assertEquals(await tenantFiles(node), []);
    assertEquals(
      Object.keys(await tree(node.config().staticPodDir)).sort(),
      ["etcd.yaml", ...PARENTS.map(manifestFileName)].sort(),
    );
  });
});

Deno.test("a tenant's checkpoint left by an earlier configuration is withdrawn and removed, said once", async () => {
  await withTenantNode(async (node) => {
    // As every namespace was before: the tenant's copy is made and, "not running", activated.
    const before = await once(node, { namespaces: ["*"] });
    assertEquals(before.report.plan.starts, [TENANT]);
    assert(
      (await tenantFiles(node)).includes(
        join(node.config().staticPodDir, manifestFileName(TENANT)),
      ),
    );

    const after = await once(node);
    assertEquals(after.code, 0, JSON.stringify(after.log));
    assertEquals(after.report.plan.removes, [TENANT]);
    assertEquals(after.report.plan.starts, []);
    assertEquals(Object.keys(after.report.plan.state).sort(), PARENTS);
    assertEquals(await tenantFiles(node), []);
    const warned = after.log.filter((l) => l.level === "warn");
    assertEquals(warned.length, 1, JSON.stringify(after.log));
    assertEquals(warned[0].id, TENANT);
    assert(JSON.stringify(warned[0]).includes("namespace"), JSON.stringify(warned[0]));
    assertEquals(after.report.changes.find((c) => c.id === TENANT)?.reason, "OutsideNamespaces");

    const again = await once(node);
    assertEquals(again.report.changes, []);
    assertEquals(again.log.filter((l) => l.level === "warn"), []);
  });
});
