/**
 * A kubeconfig the agent cannot load: a missing file is said to be missing, never taken for
 * credentials the API server refused, and doctor suggests the kubeconfig this node has — the
 * running kubelet's (from a fake /proc tree: this machine runs no kubelet), then the common
 * places — which, set, makes the API server answer.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { defaultConfig } from "../../lib/config/load.ts";
import { runDoctor } from "../../lib/doctor/doctor.ts";
import {
  findKubeconfigs,
  kubeconfigFinding,
  KUBELET_KUBECONFIGS,
} from "../../lib/doctor/kubeconfig.ts";
import { loadKubeconfig } from "../../lib/sources/kubeconfig.ts";
import { SimNode } from "../../lib/sim/node.ts";
import { withTempDir } from "../helpers/temp_dir.ts";
import { fakeProc } from "./fake_proc.ts";

async function touch(path: string, text = "") {
  await Deno.mkdir(join(path, ".."), { recursive: true });
  await Deno.writeTextFile(path, text);
}

Deno.test("the kubeconfigs found: each running kubelet's --kubeconfig, then the common places that exist, once each", async () => {
  await withTempDir(async (dir) => {
    const own = join(dir, "etc/kubernetes/kubelet.conf");
    const typhoon = join(dir, "var/lib/kubelet/kubeconfig");
    await touch(own);
    const proc = await fakeProc(dir, [
      { pid: 1, comm: "systemd", args: ["/sbin/init"] },
      { pid: 420, comm: "kubelet", args: ["/usr/bin/kubelet", `--kubeconfig=${own}`] },
      // A kubelet whose kubeconfig is gone adds nothing.
      { pid: 421, comm: "kubelet", args: ["/usr/bin/kubelet", "--kubeconfig", `${dir}/gone`] },
    ]);
    const common = [own, typhoon, join(dir, "etc/kubernetes/absent.conf")];
    assertEquals(await findKubeconfigs(proc, common), [
      { path: own, from: "the running kubelet's --kubeconfig" },
    ]);
    await touch(typhoon);
    assertEquals(await findKubeconfigs(proc, common), [
      { path: own, from: "the running kubelet's --kubeconfig" },
      { path: typhoon, from: "on this node" },
    ]);
    // Without /proc to read, the common places still count.
    assertEquals(await findKubeconfigs(join(dir, "no-proc"), common), [
      { path: own, from: "on this node" },
      { path: typhoon, from: "on this node" },
    ]);
    assertEquals(KUBELET_KUBECONFIGS, [
      "/etc/kubernetes/kubelet.conf",
      "/var/lib/kubelet/kubeconfig",
    ]);
  });
});

Deno.test("a missing kubeconfig is said to be missing, with the one to set instead; an unusable one is said to be unusable", async () => {
  await withTempDir(async (dir) => {
    const configured = join(dir, "etc/kubernetes/kubeconfig");
    const config = { ...defaultConfig("cp-1"), kubeconfig: configured };
    const own = join(dir, "etc/kubernetes/kubelet.conf");
    const other = join(dir, "var/lib/kubelet/kubeconfig");
    const found = [
      { path: own, from: "the running kubelet's --kubeconfig" as const },
      { path: other, from: "on this node" as const },
    ];

    const missing = await kubeconfigFinding(config, loadKubeconfig(configured), found);
    assertEquals(missing, {
      check: "source",
      level: "error",
      subject: "apiserver",
      found: `missing file ${configured} (kubeconfig, --kubeconfig): the agent cannot ask the ` +
        "API server, and takes every pass for an outage",
      fix: `set kubeconfig (--kubeconfig) to ${own} (the running kubelet's --kubeconfig; also ` +
        `on this node: ${other}): the kubelet's own identity, system:node:cp-1, which the Node ` +
        "authorizer lets read this node's pods and their secrets and configmaps",
    });

    // Nothing found: where to look, and the README's section on credentials.
    const none = await kubeconfigFinding(config, loadKubeconfig(configured), []);
    assert(none?.found.startsWith(`missing file ${configured} `), none?.found);
    assertEquals(
      none?.fix,
      "set kubeconfig (--kubeconfig) to the kubelet's own kubeconfig (the file its --kubeconfig " +
        "flag names; kubeadm's is /etc/kubernetes/kubelet.conf), or to one for an identity of " +
        'the agent\'s own (README.md, "Credentials and RBAC")',
    );

    // There, but not a kubeconfig: what is wrong with it, and the suggestion.
    await touch(configured, "clusters: [\n");
    const broken = await kubeconfigFinding(config, loadKubeconfig(configured), found);
    assertEquals([broken?.level, broken?.subject], ["error", "apiserver"]);
    assert(broken?.found.startsWith(`the kubeconfig cannot be used (kubeconfig ${configured}: `));
    assert(!broken?.found.includes("does not accept"), broken?.found);
    assert(broken?.fix?.startsWith(`correct ${configured} as the message says, or set kubeconfig`));

    // A configured file that is itself among those found is not suggested again.
    const self = await kubeconfigFinding(
      { ...config, kubeconfig: own },
      loadKubeconfig(own),
      found,
    );
    assert(self?.fix?.includes(`set kubeconfig (--kubeconfig) to ${other} (on this node)`));
  });
});

Deno.test("doctor with a missing kubeconfig: missing file, the running kubelet's suggested, and with it the API server answers", async () => {
  const node = await SimNode.start();
  try {
    const proc = await fakeProc(node.root, [
      { pid: 420, comm: "kubelet", args: ["/usr/bin/kubelet", "--kubeconfig", node.kubeconfig] },
    ]);
    const missing = join(node.root, "etc/kubernetes/no-such-kubeconfig");
    const options = { procRoot: proc, unitSearchPath: [], commonKubeconfigs: [] };
    const report = await runDoctor(node.config({ kubeconfig: missing }), options);
    const api = report.findings.find((f) => f.check === "source" && f.subject === "apiserver");
    assertEquals(api?.level, "error");
    assert(api?.found.startsWith(`missing file ${missing} (kubeconfig, --kubeconfig)`), api?.found);
    assert(
      api?.fix?.startsWith(
        `set kubeconfig (--kubeconfig) to ${node.kubeconfig} (the running kubelet's --kubeconfig)`,
      ),
      api?.fix,
    );
    for (const f of report.findings) assert(!f.found.includes("does not accept"), f.found);

    // As suggested: the API server answers with the kubelet's credentials.
    const fixed = await runDoctor(node.config({ kubeconfig: node.kubeconfig }), options);
    const answered = fixed.findings.find((f) => f.check === "source" && f.subject === "apiserver");
    assertEquals(answered?.level, "ok", answered?.found);
  } finally {
    await node.close();
  }
});
