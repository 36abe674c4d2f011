/**
 * End to end through `ckpt-agent --once`, as a runbook runs it: the real binary's code in a
 * subprocess, against a simulated node (real mTLS API server and kubelet, real gRPC runtime,
 * real directories). Each scenario, (a) to (j), is one runbook situation: a first pass, an outage,
 * the parent back, the parent deleted, a restart mid-grace, a failed runtime or kubelet, foreign
 * files, projected volumes, sandbox records.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import type { PassReport } from "../../lib/pass/report.ts";
import { manifestFileName, unambiguousManifestFileName } from "../../lib/core/checkpoint_layout.ts";
import { SimNode } from "../../lib/sim/node.ts";
import { runCli } from "../helpers/cli.ts";
import { manifestTree, tree } from "../helpers/tree.ts";
import { withNode } from "../helpers/sim_node.ts";

const APISERVER = "kube-system/kube-apiserver-7x2kq";
const CONTROLLER = "kube-system/kube-controller-manager-m4t9z";
const SCHEDULER = "kube-system/kube-scheduler-q8w2c";
const PARENTS = [APISERVER, CONTROLLER, SCHEDULER];

const configFiles = new WeakMap<SimNode, string>();

async function once(node: SimNode, ...flags: string[]) {
  let config = configFiles.get(node);
  if (!config) configFiles.set(node, config = await node.writeConfigFile());
  const r = await runCli(["--once", "--config", config, "--output", "json", ...flags]);
  assert(r.stdout.trim() !== "", `no report; exit ${r.code}; stderr: ${r.stderr}`);
  return { code: r.code, report: JSON.parse(r.stdout) as PassReport, stderr: r.stderr };
}

const manifestName = manifestFileName;

/** The levels of the JSON lines of a log. */
function levels(stderr: string): Set<string> {
  return new Set(
    stderr.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l).level),
  );
}

async function staticPodDir(node: SimNode): Promise<string[]> {
  return Object.keys(await tree(node.config().staticPodDir)).sort();
}

Deno.test("(a) the first pass writes checkpoints and files with tight modes; an identical pass writes nothing", async () => {
  await withNode(async (node) => {
    const first = await once(node);
    assertEquals(first.code, 0, first.stderr);
    assertEquals(first.report.complete, true);
    assertEquals(first.report.plan.stops, PARENTS);
    const c = node.config();
    const inactive = await manifestTree(c.inactiveDir);
    assertEquals(Object.keys(inactive).sort(), PARENTS.map(manifestName).sort());
    for (const entry of Object.values(inactive)) assertEquals(entry.mode, 0o600);
    const secrets = await tree(c.secretsDir);
    const apiSecrets = "kube-system/kube-apiserver-7x2kq/kube-apiserver";
    assertEquals(secrets[apiSecrets].type, "dir");
    // The pods run as 65534 with fsGroup 65534: their files are root's and their group's, to
    // read only, in directories only root can change.
    assertEquals(secrets[`${apiSecrets}/apiserver.key`], {
      type: "file",
      mode: 0o640,
      uid: 0,
      gid: 65534,
      content: secrets[`${apiSecrets}/apiserver.key`].content as string,
    });
    assert(secrets[`${apiSecrets}/apiserver.key`].content!.includes("BEGIN EC PRIVATE KEY"));
    for (const [path, entry] of Object.entries({ ...secrets, ...await tree(c.configmapsDir) })) {
      // `<ns>`, `<ns>/<pod>` and `_volumes` are root's alone; a volume's and below, its group's.
      const above = /^[^/]+(\/[^/]+)?(\/_volumes)?$/.test(path);
      const want = entry.type === "file"
        ? [0, 65534, 0o640]
        : above
        ? [0, 0, 0o700]
        : [0, 65534, 0o750];
      assertEquals([entry.uid, entry.gid, entry.mode], want, path);
    }
    // Every mount of a stored volume is read-only, whatever the parent said.
    for (const [file, entry] of Object.entries(inactive)) {
      const spec = JSON.parse(entry.content!).spec;
      const stored = new Set(
        spec.volumes.filter((v: { hostPath?: { path: string } }) =>
          v.hostPath?.path.startsWith(`${c.secretsDir}/`) ||
          v.hostPath?.path.startsWith(`${c.configmapsDir}/`)
        ).map((v: { name: string }) => v.name),
      );
      assert(stored.size > 0, file);
      for (const container of [...spec.containers, ...(spec.initContainers ?? [])]) {
        for (const mount of container.volumeMounts ?? []) {
          if (stored.has(mount.name)) assertEquals(mount.readOnly, true, `${file} ${mount.name}`);
        }
      }
    }

    const before = await tree(node.root, { stamps: true });
    const second = await once(node);
    assertEquals(second.code, 0, second.stderr);
    assertEquals(second.report.applied, []);
    assertEquals(second.report.bytesWritten, 0);
    assertEquals(second.report.plan.stops, []);
    const after = await tree(node.root, { stamps: true });
    // Only the lock file may be touched by a pass that has nothing to do.
    const lock = "run/lock/ckpt-agent.lock";
    delete before[lock];
    delete after[lock];
    assertEquals(after, before);
  });
});

/** The lines of `--once`'s text report that list checkpoints, by their heading. */
async function textLists(node: SimNode, ...flags: string[]): Promise<Record<string, string>> {
  const r = await runCli(["--once", "--config", configFiles.get(node)!, ...flags]);
  const lists = r.stdout.split("\n").map((l) => /^ {2}(\w+): +(.+)$/.exec(l)).filter((m) =>
    m !== null && ["new", "started", "stopped", "removed", "start", "stop", "remove"].includes(m[1])
  ).map((m) => [m![1], m![2]]);
  return Object.fromEntries(lists);
}

Deno.test("(a') the text report calls checkpoints written for the first time new, not stopped", async () => {
  await withNode(async (node) => {
    configFiles.set(node, await node.writeConfigFile());
    const dry = await textLists(node, "--dry-run");
    assertEquals(dry, { start: "-", new: PARENTS.join(", "), stop: "-", remove: "-" });
    const first = await textLists(node);
    assertEquals(first, { started: "-", new: PARENTS.join(", "), stopped: "-", removed: "-" });
    await node.loseControlPlane();
    assertEquals((await textLists(node)).started, PARENTS.join(", "));
    await node.restoreControlPlane();
    const back = await textLists(node);
    assertEquals(back, { started: "-", new: "-", stopped: PARENTS.join(", "), removed: "-" });
  });
});

Deno.test("(b) API server down and the pod not running: the active manifest appears in one pass", async () => {
  await withNode(async (node) => {
    const first = await once(node);
    assert(levels(first.stderr).has("info"), first.stderr);
    await node.loseControlPlane();
    // As quiet as an operator asked: the failed sources are said, the state changes are not.
    const r = await once(node, "--log-level", "warn");
    assertEquals([...levels(r.stderr)], ["warn"], r.stderr);
    // Degraded (the API server and the kubelet do not answer) but it did its job.
    assertEquals(r.code, 1);
    assertEquals(r.report.plan.starts, PARENTS);
    assertEquals(r.report.errors, []);
    assertEquals(await staticPodDir(node), ["etcd.yaml", ...PARENTS.map(manifestName)].sort());
    const c = node.config();
    assertEquals(
      await Deno.readTextFile(join(c.staticPodDir, manifestName(APISERVER))),
      await Deno.readTextFile(join(c.inactiveDir, manifestName(APISERVER))),
    );
  });
});

Deno.test("(b') an API server answering 503 (etcd gone) is an outage, never 'no parents'", async () => {
  await withNode(async (node) => {
    await once(node);
    await node.loseControlPlane("etcd-gone");
    const r = await once(node);
    assertEquals(r.report.plan.removes, []);
    assertEquals(r.report.plan.starts, PARENTS);
    assertEquals(r.report.failures.find((f) => f.source === "apiserver")?.kind, "server-error");
  });
});

Deno.test("(c) the parent running again: the copy is withdrawn", async () => {
  await withNode(async (node) => {
    await once(node);
    await node.loseControlPlane();
    await once(node);
    await node.restoreControlPlane();
    const r = await once(node);
    assertEquals(r.code, 0, r.stderr);
    assertEquals(r.report.plan.stops, PARENTS);
    assertEquals(await staticPodDir(node), ["etcd.yaml"]);
  });
});

Deno.test("(d) a parent deleted in the API: everything of it is gone after the grace period", async () => {
  await withNode(async (node) => {
    await once(node, "--checkpoint-grace-period", "0s");
    await node.deleteParent(SCHEDULER);
    const r = await once(node, "--checkpoint-grace-period", "0s");
    assertEquals(r.report.plan.removes, [SCHEDULER]);
    const c = node.config();
    const scheduler = "kube-system/kube-scheduler-q8w2c";
    for (const dir of [c.inactiveDir, c.staticPodDir]) {
      assert(!Object.keys(await tree(dir)).includes(manifestName(SCHEDULER)), dir);
    }
    for (const dir of [c.secretsDir, c.configmapsDir]) {
      assert(!Object.keys(await tree(dir)).some((p) => p.startsWith(scheduler)), dir);
    }
    // The others are untouched, and the status record is forgotten.
    assertEquals(Object.keys(r.report.plan.state).sort(), [APISERVER, CONTROLLER]);
    assert(
      !Object.keys(await tree(join(c.stateDir, "status"))).some((f) => f.includes("scheduler")),
    );
  });
});

Deno.test("(e) an agent restarted mid-grace keeps the deadline", async () => {
  await withNode(async (node) => {
    await once(node, "--checkpoint-grace-period", "1h");
    await node.deleteParent(SCHEDULER);
    const first = await once(node, "--checkpoint-grace-period", "1h");
    const deadline = first.report.plan.state[SCHEDULER];
    assertEquals(deadline.state, "inactive-grace");
    // A new process, another grace period configured: the stored deadline stands.
    const second = await once(node, "--checkpoint-grace-period", "2h");
    assertEquals(second.report.plan.state[SCHEDULER], deadline);
    assertEquals(second.report.changes, []);
  });
});

Deno.test("(f) the runtime unreachable: nothing started or stopped, exit 1", async () => {
  await withNode(async (node) => {
    await once(node);
    await node.stopRuntime();
    await node.loseControlPlane();
    const before = await tree(node.config().staticPodDir, { stamps: true });
    const r = await once(node);
    assertEquals(r.code, 1);
    assertEquals([r.report.plan.starts, r.report.plan.stops, r.report.plan.removes], [[], [], []]);
    assertEquals(r.report.failures.map((f) => f.source).sort(), [
      "apiserver",
      "kubelet",
      "runtime",
    ]);
    for (const id of PARENTS) assertEquals(r.report.plan.state[id], { state: "inactive" });
    assertEquals(await tree(node.config().staticPodDir, { stamps: true }), before);
  });
});

Deno.test("(g) the kubelet unreachable during an outage: existing checkpoints still activate", async () => {
  await withNode(async (node) => {
    await once(node);
    await node.loseControlPlane();
    await node.kubelet.secure.stopListening();
    const r = await once(node);
    assertEquals(r.report.failures.find((f) => f.source === "kubelet")?.kind, "unreachable");
    assertEquals(r.report.plan.starts, PARENTS);
    assertEquals(await staticPodDir(node), ["etcd.yaml", ...PARENTS.map(manifestName)].sort());
  });
});

Deno.test("(h) foreign manifests and dot-files in the static-pod dir are never touched", async () => {
  await withNode(async (node) => {
    const dir = node.config().staticPodDir;
    await Deno.writeTextFile(join(dir, ".kube-proxy.json.swp"), "editor swap file");
    await Deno.writeTextFile(join(dir, "README"), "not a manifest at all {");
    // A manifest named like the apiserver's checkpoint, but of a pod that is not a checkpoint.
    await Deno.writeTextFile(
      join(dir, manifestName(APISERVER)),
      JSON.stringify({ apiVersion: "v1", kind: "Pod", metadata: { name: "x", namespace: "y" } }),
    );
    const before = await tree(dir, { stamps: true });
    const first = await once(node);
    // The name is held: the apiserver's checkpoint gets a name of its own, and says so once.
    assertEquals(first.code, 0, first.stderr);
    const apiserverFile = unambiguousManifestFileName(APISERVER);
    assertEquals(
      Object.keys(await manifestTree(node.config().inactiveDir)).sort(),
      [apiserverFile, manifestName(CONTROLLER), manifestName(SCHEDULER)].sort(),
    );
    const said = first.stderr.split("\n").filter((l) => l.includes("manifest file name taken"));
    assertEquals(said.length, 1);
    assertEquals(JSON.parse(said[0]).file, apiserverFile);

    await node.loseControlPlane();
    const down = await once(node);
    assertEquals(down.report.errors, []);
    assertEquals(down.report.plan.starts, PARENTS);
    assertEquals(
      (await staticPodDir(node)).filter((f) => f.includes("kube-system")),
      [apiserverFile, manifestName(APISERVER), manifestName(CONTROLLER), manifestName(SCHEDULER)]
        .sort(),
    );
    await node.restoreControlPlane();
    assertEquals((await once(node)).report.errors, []);

    // A foreign file that appears later, at the name a checkpoint already has: the checkpoint
    // keeps its name, and its activation is refused rather than overwrite the file.
    const foreign = join(dir, manifestName(CONTROLLER));
    await Deno.writeTextFile(
      foreign,
      "apiVersion: v1\nkind: Pod\nmetadata: {name: c, namespace: d}\n",
    );
    const later = await tree(dir, { stamps: true });
    await node.loseControlPlane();
    const refused = await once(node);
    assertEquals(refused.report.errors.map((e) => [e.op, e.id]), [["start", CONTROLLER]]);
    assert(refused.report.errors[0].message.includes("not a checkpoint of"));
    await node.restoreControlPlane();
    await once(node);
    const after = await tree(dir, { stamps: true });
    for (const name of Object.keys(before)) assertEquals(after[name], before[name], name);
    assertEquals(after[manifestName(CONTROLLER)], later[manifestName(CONTROLLER)]);
  });
});

Deno.test("(i) a pod with a kube-api-access projected volume gets working hostPath files", async () => {
  await withNode(async (node) => {
    await once(node);
    const c = node.config();
    const manifest = JSON.parse(
      await Deno.readTextFile(join(c.inactiveDir, manifestName(APISERVER))),
    );
    const volume = manifest.spec.volumes.find((v: { name: string }) =>
      v.name.startsWith("kube-api-access-")
    );
    assertEquals(Object.keys(volume).sort(), ["hostPath", "name"]);
    const files = await tree(volume.hostPath.path);
    assertEquals(Object.keys(files).sort(), ["ca.crt", "namespace"]);
    assertEquals(files.namespace.content, "kube-system");
    assert(files["ca.crt"].content!.startsWith("-----BEGIN CERTIFICATE-----"));
    assertEquals([files.namespace.uid, files.namespace.gid], [0, 65534]);
    // Every hostPath the checkpoint mounts exists.
    for (const v of manifest.spec.volumes as { hostPath?: { path: string } }[]) {
      if (!v.hostPath || v.hostPath.path === "/etc/ssl/certs") continue;
      assert((await Deno.stat(v.hostPath.path)).isDirectory, v.hostPath.path);
    }
  });
});

Deno.test("(j) sandboxes of running checkpoints are recorded, with their network, and forgotten after", async () => {
  await withNode(async (node) => {
    await once(node);
    await node.loseControlPlane();
    await once(node);
    await node.sync(); // the kubelet starts the static copies
    const recorded = await once(node);
    const records = recorded.report.applied.filter((a) => a.op === "sandbox-record");
    assertEquals(records.map((a) => a.detail).sort(), [
      "kube-system/kube-apiserver-7x2kq-cp-1",
      "kube-system/kube-controller-manager-m4t9z-cp-1",
      "kube-system/kube-scheduler-q8w2c-cp-1",
    ]);
    const state = node.config().stateDir;
    const files = await tree(join(state, "sandboxes"));
    const scheduler = Object.values(files).map((f) => JSON.parse(f.content!).data)
      .find((d) => d.checkpoint.name === "kube-scheduler-q8w2c-cp-1");
    // The copy declares no ports (its parent's host port stays free for the parent).
    assertEquals(scheduler.checkpoint.portMappings, []);
    assertEquals(scheduler.checkpoint.interfaces.length, 2);
    assert(scheduler.checkpoint.netnsPath.startsWith("/var/run/netns/"));
    // Status records say when and why each was activated.
    const status = JSON.parse(
      (await tree(join(state, "status")))[`kube-system_kube-apiserver-7x2kq.json`].content!,
    ).data;
    assertEquals([status.state, status.reason], ["active", "ControlPlaneUnavailable"]);
    assert(status.lastActivatedAt);

    await node.restoreControlPlane();
    const withdrawn = await once(node);
    assertEquals(withdrawn.report.applied.filter((a) => a.op === "sandbox-forget").length, 3);
    assertEquals(Object.keys(await tree(join(state, "sandboxes"))), []);
  });
});
