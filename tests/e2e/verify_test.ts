/**
 * `ckpt-agent verify` on a node the agent has written: sound after real passes, and every kind of
 * damage to manifests and stored files is named, without anything being changed.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { join } from "node:path";
import { SimNode } from "../../lib/sim/node.ts";
import { runCli } from "../helpers/cli.ts";
import { tree } from "../helpers/tree.ts";

const API = "kube-system-kube-apiserver-7x2kq.json";
const API_FILES = "kube-system/kube-apiserver-7x2kq";

/**
 * Replaces a file, as an editor that writes a new file does: an active manifest is a hard link to
 * the inactive one, and writing one in place would change both.
 */
async function replace(path: string, text: string) {
  await Deno.remove(path);
  await Deno.writeTextFile(path, text);
}

Deno.test("verify: sound after real passes; each kind of damage named; nothing changed", async () => {
  const node = await SimNode.start();
  try {
    const config = await node.writeConfigFile();
    const verify = async () => {
      const r = await runCli(["verify", "--config", config, "--json"]);
      return { code: r.code, report: JSON.parse(r.stdout) };
    };
    await runCli(["--once", "--config", config]);
    await node.loseControlPlane();
    await runCli(["--once", "--config", config]);
    const sound = await verify();
    assertEquals(sound.report.findings, []);
    assertEquals(sound.code, 0);

    const c = node.config();
    const secret = join(c.secretsDir, API_FILES, "kube-apiserver", "apiserver.key");
    await Deno.chmod(secret, 0o644);
    await Deno.chown(join(c.secretsDir, API_FILES, "kube-apiserver", "ca.crt"), 0, 0);
    await Deno.remove(join(c.configmapsDir, API_FILES, "_volumes/config"), { recursive: true });
    await replace(join(c.staticPodDir, API), "{}");
    await Deno.writeTextFile(join(c.inactiveDir, "garbage.json"), "{ not json");
    await Deno.mkdir(join(c.secretsDir, "kube-system", "left-behind"), { recursive: true });
    const temp = join(c.secretsDir, API_FILES, "kube-apiserver", ".ca.crt.ckpt-tmp-1");
    await Deno.writeTextFile(temp, "");
    await Deno.chown(temp, 0, 65534);
    await Deno.chmod(temp, 0o640);
    await Deno.mkdir(join(c.secretsDir, API_FILES, "_volumes/old-volume"));

    const before = await tree(node.root, { stamps: true });
    const damaged = await verify();
    assertEquals(damaged.code, 1);
    const problems = Object.fromEntries(
      damaged.report.findings.map((f: { file: string; problem: string }) => [f.file, f.problem]),
    );
    assertEquals(problems[secret], "mode 0644, expected 0640");
    assertEquals(
      problems[join(c.secretsDir, API_FILES, "kube-apiserver", "ca.crt")],
      "owned by 0:0, expected 0:65534",
    );
    assertEquals(
      problems[join(c.configmapsDir, API_FILES, "_volumes/config")],
      "mounted by kube-system/kube-apiserver-7x2kq but not stored yet",
    );
    // The `{}` is not a pod at all: not ours to judge in the static-pod dir.
    assertEquals(problems[join(c.staticPodDir, API)], undefined);
    assertEquals(
      problems[join(c.inactiveDir, "garbage.json")].startsWith("not JSON or YAML"),
      true,
    );
    assertEquals(
      problems[join(c.secretsDir, "kube-system", "left-behind")],
      "belongs to no checkpoint",
    );
    assertEquals(problems[temp], "leftover temp file of an interrupted write");
    assertEquals(
      problems[join(c.secretsDir, API_FILES, "_volumes/old-volume")],
      "not mounted by kube-system/kube-apiserver-7x2kq",
    );
    assertEquals(damaged.report.findings.length, 7);
    assertEquals(await tree(node.root, { stamps: true }), before, "verify is read-only");

    // An active checkpoint that differs from its inactive source is named too.
    const active = join(c.staticPodDir, "kube-system-kube-scheduler-q8w2c.json");
    const pod = JSON.parse(await Deno.readTextFile(active));
    pod.spec.hostNetwork = true;
    await replace(active, JSON.stringify(pod));
    const differs = await verify();
    const found = differs.report.findings.find((f: { file: string }) => f.file === active);
    assertEquals(found?.problem.startsWith("differs from "), true);
  } finally {
    await node.close();
  }
});
