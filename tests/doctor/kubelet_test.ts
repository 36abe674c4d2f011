/**
 * Which directory the kubelet reads static pods from: its command line, from a fake /proc tree
 * laid out as the kernel lays out the real one (this machine runs no kubelet), its config file
 * and config-dir drop-ins, and the `kubeletConfigFile` setting when no kubelet is seen.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { defaultConfig } from "../../lib/config/load.ts";
import type { Config } from "../../lib/config/types.ts";
import type { Finding } from "../../lib/doctor/finding.ts";
import {
  findKubelets,
  flagValue,
  readKubeletConfig,
  staticPodDirFindings,
} from "../../lib/doctor/kubelet.ts";
import { withTempDir } from "../helpers/temp_dir.ts";
import { fakeProc, type FakeProcess } from "./fake_proc.ts";

const SYSTEMD: FakeProcess = { pid: 1, comm: "systemd", args: ["/sbin/init"] };
const CONTAINERD: FakeProcess = {
  pid: 310,
  comm: "containerd",
  args: ["/usr/bin/containerd", "--config", "/etc/containerd/config.toml"],
};

function kubelet(...flags: string[]): FakeProcess {
  return { pid: 420, comm: "kubelet", args: ["/usr/bin/kubelet", ...flags] };
}

async function writeKubeletConfig(file: string, staticPodPath?: string): Promise<string> {
  await Deno.mkdir(join(file, ".."), { recursive: true });
  const lines = ["apiVersion: kubelet.config.k8s.io/v1beta1", "kind: KubeletConfiguration"];
  if (staticPodPath !== undefined) lines.push(`staticPodPath: ${staticPodPath}`);
  await Deno.writeTextFile(file, `${lines.join("\n")}\n`);
  return file;
}

function nodeConfig(root: string, overrides: Partial<Config> = {}): Config {
  return {
    ...defaultConfig("cp-1"),
    staticPodDir: join(root, "etc/kubernetes/manifests"),
    kubeletConfigFile: join(root, "var/lib/kubelet/config.yaml"),
    ...overrides,
  };
}

function levels(findings: Finding[]): string[] {
  return findings.map((f) => f.level);
}

Deno.test("flagValue reads --name=value and --name value, the last one winning, up to --", () => {
  const args = ["kubelet", "--config=/a", "--v", "2", "--config", "/b", "--", "--config=/c"];
  assertEquals(flagValue(args, "config"), "/b");
  assertEquals(flagValue(args, "v"), "2");
  assertEquals(flagValue(args, "pod-manifest-path"), undefined);
  // The program's own name is no flag, and a prefix of another flag's name is not that flag.
  assertEquals(flagValue(["--config=/x", "--config-dir=/d"], "config"), undefined);
  assertEquals(flagValue(["kubelet", "--config-dir=/d"], "config"), undefined);
});

Deno.test("readKubeletConfig: YAML or JSON, staticPodPath resolved against the file's directory", async () => {
  await withTempDir(async (dir) => {
    const yaml = await writeKubeletConfig(join(dir, "a/config.yaml"), "/etc/kubernetes/manifests");
    assertEquals(await readKubeletConfig(yaml), {
      kind: "read",
      staticPodPath: "/etc/kubernetes/manifests",
    });
    const json = join(dir, "b/config.json");
    await Deno.mkdir(join(dir, "b"));
    await Deno.writeTextFile(
      json,
      JSON.stringify({ kind: "KubeletConfiguration", staticPodPath: "manifests" }),
    );
    assertEquals(await readKubeletConfig(json), {
      kind: "read",
      staticPodPath: join(dir, "b/manifests"),
    });
    assertEquals(await readKubeletConfig(await writeKubeletConfig(join(dir, "c.yaml"))), {
      kind: "read",
    });
    assertEquals(await readKubeletConfig(join(dir, "none.yaml")), { kind: "absent" });
    const other = join(dir, "other.yaml");
    await Deno.writeTextFile(other, "kind: KubeProxyConfiguration\n");
    assertEquals((await readKubeletConfig(other)).kind, "unusable");
    await Deno.writeTextFile(other, "kind: [\n");
    assertEquals((await readKubeletConfig(other)).kind, "unusable");
  });
});

Deno.test("findKubelets finds the kubelet by its name among the processes, and skips what ended", async () => {
  await withTempDir(async (root) => {
    const proc = await fakeProc(root, [
      SYSTEMD,
      CONTAINERD,
      kubelet("--config=/var/lib/kubelet/config.yaml"),
      // Started through a wrapper that kept the name: comm says what runs.
      { pid: 77, comm: "kubelet", args: ["/opt/bin/kubelet-wrapper", "--v=2"] },
    ]);
    assertEquals(await findKubelets(proc), [
      { pid: 77, args: ["/opt/bin/kubelet-wrapper", "--v=2"] },
      { pid: 420, args: ["/usr/bin/kubelet", "--config=/var/lib/kubelet/config.yaml"] },
    ]);
  });
});

Deno.test("a running kubelet whose config file names another directory is an error", async () => {
  await withTempDir(async (root) => {
    const config = nodeConfig(root);
    await Deno.mkdir(config.staticPodDir, { recursive: true });
    const file = await writeKubeletConfig(join(root, "kubelet.yaml"), join(root, "srv/pods"));
    const proc = await fakeProc(root, [SYSTEMD, kubelet(`--config=${file}`), CONTAINERD]);
    const [finding, ...rest] = await staticPodDirFindings(config, proc);
    assertEquals(rest, []);
    assertEquals([finding.check, finding.level], ["static-pod-dir", "error"]);
    assert(finding.found.includes(`the running kubelet (pid 420) reads static pods from`));
    assert(finding.found.includes(join(root, "srv/pods")), finding.found);
    assert(finding.found.includes(`staticPodPath in ${file}`), finding.found);
    assert(finding.fix?.includes(`set staticPodDir to ${join(root, "srv/pods")}`), finding.fix);
  });
});

Deno.test("flags win over drop-ins, drop-ins over the config file, as in the kubelet", async () => {
  await withTempDir(async (root) => {
    const config = nodeConfig(root);
    const ours = config.staticPodDir;
    await Deno.mkdir(ours, { recursive: true });
    const file = await writeKubeletConfig(join(root, "kubelet.yaml"), join(root, "elsewhere"));
    const dropIns = join(root, "kubelet.conf.d");
    await writeKubeletConfig(join(dropIns, "10-pods.conf"), join(root, "also-elsewhere"));
    await writeKubeletConfig(join(dropIns, "20-pods.conf"), ours);
    await writeKubeletConfig(join(dropIns, "30-other.conf"));
    // Not a drop-in: the kubelet reads only *.conf.
    await writeKubeletConfig(join(dropIns, "99-pods.yaml"), join(root, "ignored"));

    const cases: [string[], string, string][] = [
      [[`--config=${file}`], "error", `staticPodPath in ${file}`],
      [[`--config=${file}`, `--config-dir=${dropIns}`], "ok", join(dropIns, "20-pods.conf")],
      [
        [`--config=${file}`, `--config-dir=${dropIns}`, "--pod-manifest-path", join(root, "x")],
        "error",
        "its --pod-manifest-path flag",
      ],
      [[`--config=${file}`, `--pod-manifest-path=${ours}`], "ok", "--pod-manifest-path"],
      [["--v=2"], "error", "neither --pod-manifest-path nor --config"],
    ];
    for (const [flags, level, from] of cases) {
      await Deno.remove(join(root, "proc"), { recursive: true }).catch(() => {});
      const proc = await fakeProc(root, [kubelet(...flags)]);
      const [finding] = await staticPodDirFindings(config, proc);
      assertEquals(finding.level, level, `${flags.join(" ")}: ${finding.found}`);
      assert(finding.found.includes(from), `${flags.join(" ")}: ${finding.found}`);
    }
  });
});

Deno.test("without a running kubelet, kubeletConfigFile says; directories compare by their real paths", async () => {
  await withTempDir(async (root) => {
    const config = nodeConfig(root);
    const proc = await fakeProc(root, [SYSTEMD, CONTAINERD]);

    // No kubelet, no file: not checked, which is a warning.
    const [unchecked] = await staticPodDirFindings(config, proc);
    assertEquals(unchecked.level, "warning");
    assert(unchecked.found.startsWith("not checked: no kubelet runs"), unchecked.found);
    assert(unchecked.fix?.includes("kubeletConfigFile"), unchecked.fix);

    // The kubelet's path is a symlink to ours: the same directory.
    await Deno.mkdir(config.staticPodDir, { recursive: true });
    await Deno.symlink(config.staticPodDir, join(root, "manifests-link"));
    await writeKubeletConfig(config.kubeletConfigFile, join(root, "manifests-link"));
    const [same] = await staticPodDirFindings(config, proc);
    assertEquals(same.level, "ok", same.found);
    assert(same.found.includes(`(${config.staticPodDir})`), same.found);

    await writeKubeletConfig(config.kubeletConfigFile, join(root, "srv/pods"));
    const [other] = await staticPodDirFindings(config, proc);
    assertEquals(other.level, "error", other.found);

    // A file without staticPodPath: the command line, unseen, might still name one.
    await writeKubeletConfig(config.kubeletConfigFile);
    const [none] = await staticPodDirFindings(config, proc);
    assertEquals(none.level, "warning", none.found);
    assert(none.found.includes("unless its command line has --pod-manifest-path"), none.found);

    // /proc that cannot be read: said, and the file is read all the same.
    await writeKubeletConfig(config.kubeletConfigFile, config.staticPodDir);
    const [noProc] = await staticPodDirFindings(config, join(root, "no-proc"));
    assertEquals(levels([noProc]), ["ok"]);
    assert(noProc.found.includes("the running kubelet was not looked for"), noProc.found);
  });
});
