/**
 * `ckpt-agent doctor` as an operator runs it, a subprocess against a simulated node: its exit
 * status, its text and its JSON. The node's unit files are in a temp directory that
 * `$SYSTEMD_UNIT_PATH` points at, as it points systemd at one. This machine runs no kubelet, so
 * the kubelet's static-pod dir comes from `kubeletConfigFile` (the process scan is tested with a
 * fake /proc tree in tests/doctor/kubelet_test.ts).
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { stringify as toYaml } from "yaml";
import type { Config } from "../../lib/config/types.ts";
import { runDoctor } from "../../lib/doctor/doctor.ts";
import { CHECKS, type DoctorReport, type Finding } from "../../lib/doctor/finding.ts";
import { UNIT_NAME } from "../../lib/doctor/systemd_unit.ts";
import { controlPlane } from "../../lib/sim/control_plane.ts";
import { SimNode, type SimNodeOptions } from "../../lib/sim/node.ts";
import { type CliResult, runCli } from "../helpers/cli.ts";
import { installDirs } from "../doctor/node_dirs.ts";

const DAY_MS = 24 * 3600 * 1000;
const SHIPPED_UNIT = new URL("../../systemd/ckpt-agent.service", import.meta.url);

interface Setup {
  node: SimNode;
  config: Config;
  /** Runs `ckpt-agent doctor --config <the node's file> ...args`. */
  doctor(...args: string[]): Promise<CliResult>;
  /** Writes the kubelet's configuration file with this staticPodPath. */
  kubeletReads(dir: string): Promise<void>;
}

/** Only host-network parents: the default control plane's scheduler has a network of its own. */
function hostNetworkOnly(nodeName: string) {
  const cluster = controlPlane(nodeName);
  return {
    ...cluster,
    pods: cluster.pods.map((pod) => ({ ...pod, spec: { ...pod.spec, hostNetwork: true } })),
  };
}

/**
 * A node set up as install.sh sets one up: the directories, the shipped unit with a drop-in that
 * makes the node's temp root writable, the kubelet reading staticPodDir.
 */
async function withNode(
  options: SimNodeOptions,
  fn: (s: Setup) => Promise<void>,
): Promise<void> {
  const node = await SimNode.start(options);
  try {
    const kubeletConfigFile = join(node.root, "var/lib/kubelet/config.yaml");
    const config = node.config({ kubeletConfigFile });
    const configFile = await node.writeConfigFile({ kubeletConfigFile });
    await installDirs(config);
    const units = join(node.root, "etc/systemd/system");
    await Deno.mkdir(join(units, `${UNIT_NAME}.d`), { recursive: true });
    await Deno.copyFile(SHIPPED_UNIT, join(units, UNIT_NAME));
    await Deno.writeTextFile(
      join(units, `${UNIT_NAME}.d/override.conf`),
      `[Service]\nReadWritePaths=${node.root}\n`,
    );
    const kubeletReads = async (dir: string) => {
      await Deno.mkdir(join(kubeletConfigFile, ".."), { recursive: true });
      await Deno.writeTextFile(
        kubeletConfigFile,
        toYaml({
          apiVersion: "kubelet.config.k8s.io/v1beta1",
          kind: "KubeletConfiguration",
          staticPodPath: dir,
        }),
      );
    };
    await kubeletReads(config.staticPodDir);
    const doctor = (...args: string[]) =>
      runCli(["doctor", "--config", configFile, ...args], { env: { SYSTEMD_UNIT_PATH: units } });
    await fn({ node, config, doctor, kubeletReads });
  } finally {
    await node.close();
  }
}

function report(result: CliResult): DoctorReport {
  return JSON.parse(result.stdout);
}

/** `doctor --output json`, which must exit with `code`. */
async function jsonReport(s: Setup, code: number): Promise<DoctorReport> {
  const result = await s.doctor("--output", "json");
  assertEquals(result.code, code, result.stdout + result.stderr);
  return report(result);
}

function notOk(findings: readonly Finding[]): [string, string, string][] {
  return findings.filter((f) => f.level !== "ok").map((f) => [f.level, f.check, f.subject]);
}

Deno.test("a node set up as install.sh sets one up: all well, exit 0, text and JSON", async () => {
  await withNode({ cluster: hostNetworkOnly("cp-1") }, async ({ doctor, config }) => {
    const text = await doctor();
    assertEquals(text.code, 0, text.stdout + text.stderr);
    assert(text.stdout.trimEnd().endsWith("0 errors, 0 warnings, 26 ok"), text.stdout);
    assert(
      text.stdout.trimEnd().split("\n").slice(0, -1).every((line) => line.startsWith("ok       ")),
      text.stdout,
    );

    const json = await doctor("--output", "json");
    assertEquals(json.code, 0, json.stderr);
    const r = report(json);
    assertEquals([r.level, r.counts], ["ok", { ok: 26, warning: 0, error: 0 }]);
    for (const f of r.findings) {
      assertEquals(Object.keys(f).sort(), ["check", "found", "level", "subject"]);
    }
    const subjects = (check: string) =>
      r.findings.filter((f) => f.check === check).map((f) => f.subject);
    assertEquals(subjects("static-pod-dir"), ["staticPodDir"]);
    assertEquals(subjects("source"), ["apiserver", "kubelet", "runtime"]);
    assertEquals(subjects("parent-network"), [
      "kube-system/kube-apiserver-7x2kq",
      "kube-system/kube-controller-manager-m4t9z",
      "kube-system/kube-scheduler-q8w2c",
    ]);
    assertEquals(subjects("clock"), ["clock"]);
    assert(subjects("directory").includes(config.inactiveDir));
    // Every check has its say, in the order of the checks.
    assertEquals([...new Set(r.findings.map((f) => f.check))], [...CHECKS]);
  });
});

Deno.test("another static-pod dir, an expiring certificate and a missing directory: exit 2, each named with its fix", async () => {
  await withNode({ cluster: hostNetworkOnly("cp-1") }, async (s) => {
    const elsewhere = join(s.node.root, "srv/kubelet-pods");
    await s.kubeletReads(elsewhere);
    const now = Date.now();
    await s.node.rotateClientCert({
      notBefore: new Date(now - 300 * DAY_MS),
      notAfter: new Date(now + 9.5 * DAY_MS),
    });
    await Deno.remove(s.config.configmapsDir);

    const r = await jsonReport(s, 2);
    assertEquals(notOk(r.findings), [
      ["error", "static-pod-dir", "staticPodDir"],
      ["warning", "directory", s.config.configmapsDir],
      ["warning", "certificate", `kubeconfig ${s.config.kubeconfig}`],
    ]);
    const [pods, missing, cert] = r.findings.filter((f) => f.level !== "ok");
    assert(pods.found.includes(`reads static pods from ${elsewhere}`), pods.found);
    assert(pods.fix?.includes(`set staticPodDir to ${elsewhere}`), pods.fix);
    assert(missing.found.includes("(configmapsDir) does not exist"), missing.found);
    assert(missing.fix?.includes(`install -d -m 0700 ${s.config.configmapsDir}`), missing.fix);
    assert(cert.found.includes("the kubeconfig's client certificate"), cert.found);
    assert(cert.found.includes("in 9 days"), cert.found);
    assert(cert.fix?.includes("renew it"), cert.fix);

    const text = await s.doctor();
    assertEquals(text.code, 2);
    assert(text.stdout.includes(`error    static-pod-dir: `), text.stdout);
    assert(text.stdout.includes(`         fix: set staticPodDir to ${elsewhere}`), text.stdout);
    assert(text.stdout.trimEnd().endsWith("1 error, 2 warnings, 23 ok"), text.stdout);
  });
});

Deno.test("an expired certificate is an error; the API server it cannot reach is named", async () => {
  await withNode({ cluster: hostNetworkOnly("cp-1") }, async (s) => {
    const now = Date.now();
    await s.node.rotateClientCert({
      notBefore: new Date(now - 400 * DAY_MS),
      notAfter: new Date(now - DAY_MS),
    });
    const { findings } = await jsonReport(s, 2);
    const cert = findings.find((f) => f.check === "certificate" && f.level !== "ok")!;
    assertEquals(cert.level, "error");
    assert(cert.found.includes("expired on"), cert.found);
    // The API server ends the handshake of an expired certificate: no answer, said as such.
    const api = findings.find((f) => f.subject === "apiserver")!;
    assertEquals(api.level, "warning");
    assert(api.found.startsWith("the API server does not answer (unreachable: GET https://"));
  });
});

Deno.test("during an outage: the API server down is a warning that says why, and so is what it hides", async () => {
  await withNode({ cluster: hostNetworkOnly("cp-1") }, async (s) => {
    await s.node.loseControlPlane();
    const r = await jsonReport(s, 1);
    assertEquals(notOk(r.findings), [
      ["warning", "source", "apiserver"],
      ["warning", "source", "kubelet"],
      ["warning", "parent-network", "parents"],
      ["warning", "clock", "clock"],
    ]);
    const [api, kubelet] = r.findings.filter((f) => f.level !== "ok");
    assert(api.found.includes("During an outage this is expected"), api.found);
    assert(kubelet.found.includes("expected during an outage"), kubelet.found);
    const runtime = r.findings.find((f) => f.subject === "runtime")!;
    assertEquals(runtime.level, "ok");
  });
});

Deno.test("a parent off the host network and an API server whose clock is off: warnings naming them", async () => {
  await withNode({}, async (s) => {
    s.node.apiServer.setClockSkew(-120_000);
    const r = await jsonReport(s, 1);
    assertEquals(notOk(r.findings), [
      ["warning", "parent-network", "kube-system/kube-scheduler-q8w2c"],
      ["warning", "clock", "clock"],
    ]);
    const [parent, clock] = r.findings.filter((f) => f.level !== "ok");
    assert(parent.found.includes("is not on the host network"), parent.found);
    assert(parent.fix?.includes("hostNetwork: true"), parent.fix);
    assert(clock.found.includes("s ahead of the API server (v1.34.2)'s Date"), clock.found);
  });
});

Deno.test("a runtime that does not answer is an error: no checkpoint would be activated", async () => {
  await withNode({ cluster: hostNetworkOnly("cp-1") }, async (s) => {
    await s.node.stopRuntime();
    const r = await runDoctor(s.config, { unitSearchPath: [] });
    assertEquals(r.level, "error");
    const runtime = r.findings.find((f) => f.subject === "runtime")!;
    assertEquals(runtime.level, "error");
    assert(runtime.found.includes("none is activated"), runtime.found);
    assert(runtime.fix?.includes(s.config.containerRuntimeEndpoint), runtime.fix);
    // No unit in an empty search path: not checked, a warning.
    assertEquals(notOk(r.findings), [
      ["warning", "unit", UNIT_NAME],
      ["error", "source", "runtime"],
    ]);
  });
});

Deno.test("a kubelet asked unverified, as without kubeletCaFile its own certificate is: a warning with the CA to set", async () => {
  await withNode({ cluster: hostNetworkOnly("cp-1") }, async (s) => {
    const { kubeletCaFile: _, ...config } = s.config;
    const r = await runDoctor(config, { unitSearchPath: [] });
    const kubelet = r.findings.find((f) => f.subject === "kubelet")!;
    assertEquals(kubelet.level, "warning");
    assert(kubelet.found.includes("answers: 5 pods, asked unverified ("), kubelet.found);
    assert(kubelet.found.includes("could not be verified against the kubeconfig's cluster CA"));
    assert(kubelet.found.endsWith("): its answers add no parent"), kubelet.found);
    assert(kubelet.fix?.startsWith("set kubeletCaFile (--kubelet-ca-file)"), kubelet.fix);
  });
});

Deno.test("annotated pods outside the namespace setting: no parent, and the namespaces are named", async () => {
  const cluster = hostNetworkOnly("cp-1");
  const elsewhere = {
    ...cluster,
    pods: cluster.pods.map((pod) => ({
      ...pod,
      metadata: { ...pod.metadata, namespace: "monitoring" },
    })),
  };
  await withNode({ cluster: elsewhere }, async (s) => {
    const scoped = (await jsonReport(s, 1)).findings.filter((f) => f.check === "parent-network");
    assertEquals(scoped.map((f) => [f.level, f.subject]), [["warning", "parents"]]);
    assert(scoped[0].found.includes("(from the API server, in namespaces kube-system)"));
    const all = await s.doctor("--output", "json", "--namespace", "*");
    assertEquals(
      report(all).findings.filter((f) => f.check === "parent-network").map((f) => f.level),
      ["ok", "ok", "ok"],
    );
  });
});

Deno.test("a configuration that cannot be loaded: exit 2 and one line, as for every command", async () => {
  const result = await runCli(["doctor", "--poll-interval", "5", "--config", "/nonexistent"]);
  assertEquals(result.code, 2);
  assertEquals(result.stdout, "");
  assertEquals(result.stderr.trimEnd().split("\n").length, 1, result.stderr);
  assert(result.stderr.startsWith("ckpt-agent doctor: "), result.stderr);
});
