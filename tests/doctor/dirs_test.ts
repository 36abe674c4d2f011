/**
 * The configured directories on a real file system: owners and modes, missing ones, and the
 * room each file system has. Read-only and separate mounts, on real tmpfs mounts, are in
 * dirs_mounts_test.ts.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { dirname, join } from "node:path";
import { directoryFindings } from "../../lib/doctor/dirs.ts";
import type { Finding } from "../../lib/doctor/finding.ts";
import { withTempDir } from "../helpers/temp_dir.ts";
import { installDirs, nodeDirs } from "./node_dirs.ts";

function of(findings: Finding[], check: string, subject: string): Finding {
  const found = findings.find((f) => f.check === check && f.subject === subject);
  assert(found, `no ${check} finding about ${subject}: ${JSON.stringify(findings, null, 1)}`);
  return found;
}

Deno.test("directories as install.sh makes them: every finding ok", async () => {
  await withTempDir(async (root) => {
    const config = nodeDirs(root);
    await installDirs(config);
    const findings = await directoryFindings(config);
    // The mounts are read from /proc, which Deno lets only a program with every permission read:
    // dirs_mounts_test.ts checks them with every permission.
    assertEquals(findings.filter((f) => f.level !== "ok" && f.check !== "mount"), []);
    assertEquals(findings.map((f) => f.check), [
      ...Array(6).fill("directory"),
      "mount",
      "disk-room",
    ]);
    assert(of(findings, "directory", config.inactiveDir).found.includes("owner 0:0, mode 0700"));
    const room = findings.find((f) => f.check === "disk-room")!;
    assertEquals(
      room.subject,
      "staticPodDir, inactiveDir, secretsDir, configmapsDir, stateDir, lockFile",
    );
    assert(room.found.includes("the floor of 16.0 MiB"), room.found);
  });
});

Deno.test("a missing directory is named with the command that makes it", async () => {
  await withTempDir(async (root) => {
    const config = nodeDirs(root);
    await installDirs(config);
    await Deno.remove(config.secretsDir);
    await Deno.remove(config.stateDir);
    const findings = await directoryFindings(config);
    const secrets = of(findings, "directory", config.secretsDir);
    assertEquals(secrets.level, "warning");
    assert(secrets.found.includes("(secretsDir) does not exist"), secrets.found);
    assertEquals(
      secrets.fix,
      `create it (install.sh does: install -d -m 0700 ${config.secretsDir}), or correct secretsDir if it is mistyped`,
    );
    const state = of(findings, "directory", config.stateDir);
    assert(state.found.includes("keeps its states in memory only"), state.found);
  });
});

Deno.test("modes and owners: readable by others is a warning, writable by them or not root's an error", async () => {
  await withTempDir(async (root) => {
    const config = nodeDirs(root);
    await installDirs(config);
    await Deno.chmod(config.inactiveDir, 0o755);
    await Deno.chmod(config.configmapsDir, 0o777);
    await Deno.chmod(config.staticPodDir, 0o775);
    await Deno.chown(config.secretsDir, 1000, 1000);
    await Deno.remove(config.stateDir);
    await Deno.writeTextFile(config.stateDir, "not a directory\n");
    const findings = await directoryFindings(config);
    const inactive = of(findings, "directory", config.inactiveDir);
    assertEquals(inactive.level, "warning");
    assert(inactive.found.includes("mode 0755, expected 0700"), inactive.found);
    assertEquals(inactive.fix, `chmod 0700 ${config.inactiveDir}`);
    const configmaps = of(findings, "directory", config.configmapsDir);
    assertEquals(configmaps.level, "error");
    assert(configmaps.found.includes("writable by group or others"), configmaps.found);
    const pods = of(findings, "directory", config.staticPodDir);
    assertEquals(pods.level, "error");
    assertEquals(
      pods.fix,
      `chown root:root ${config.staticPodDir}; chmod go-w ${config.staticPodDir}`,
    );
    const secrets = of(findings, "directory", config.secretsDir);
    assertEquals(secrets.level, "error");
    assert(secrets.found.includes("owner 1000:1000"), secrets.found);
    assert(secrets.found.includes("not owned by root"), secrets.found);
    const state = of(findings, "directory", config.stateDir);
    assertEquals(state.level, "warning");
    assert(state.found.includes("is not a directory"), state.found);
  });
});

Deno.test("the room needed is what the checkpoints take, when that is more than the floor", async () => {
  await withTempDir(async (root) => {
    const config = nodeDirs(root);
    await installDirs(config);
    // 17 MiB of stored secrets, in a pod's directory as the agent keeps them.
    const pod = join(config.secretsDir, "kube-system/kube-apiserver-7x2kq/secrets");
    await Deno.mkdir(pod, { recursive: true });
    await Deno.writeFile(join(pod, "big.key"), new Uint8Array(17 * 1024 * 1024));
    const room = (await directoryFindings(config)).find((f) => f.check === "disk-room")!;
    assert(room.found.includes("the 17.0 MiB its checkpoints and records take now"), room.found);
  });
});

Deno.test("the lock as the agent judges it: missing is fine, a directory or file others could hold is a warning naming the fix", async () => {
  await withTempDir(async (root) => {
    const config = nodeDirs(root);
    const lockDir = dirname(config.lockFile);
    const lock = async () => of(await directoryFindings(config), "directory", lockDir);
    const missing = await lock();
    assertEquals(missing.level, "ok");
    assert(missing.found.includes("the agent makes it (0700)"), missing.found);

    await installDirs(config);
    await Deno.writeTextFile(config.lockFile, "", { mode: 0o600 });
    assertEquals((await lock()).level, "ok");

    await Deno.chmod(lockDir, 0o755);
    await Deno.chmod(config.lockFile, 0o644);
    const readable = await lock();
    assertEquals(readable.level, "warning");
    assert(
      readable.found.startsWith(
        `the lock file ${config.lockFile} can be opened by group or others (mode 0644)`,
      ),
      readable.found,
    );
    assert(readable.found.endsWith("the agent then runs without the single-agent lock"));
    assertEquals(
      readable.fix,
      `remove ${config.lockFile} (the agent makes its own), or move lockFile into a directory ` +
        "only root can write",
    );

    await Deno.remove(lockDir, { recursive: true });
    await Deno.symlink(root, lockDir);
    const linked = await lock();
    assertEquals(linked.level, "warning");
    assert(
      linked.found.startsWith(`the lock file's directory ${lockDir} is a symlink`),
      linked.found,
    );
  });
});
