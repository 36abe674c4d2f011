/** `ckpt-agent verify` as a subprocess: findings per file, exit codes, and never a change. */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { checksFor, runChecks } from "../../lib/verify/verify.ts";
import { loadConfig } from "../../lib/config/load.ts";
import { SandboxStore } from "../../lib/store/sandbox_store.ts";
import { StatusStore } from "../../lib/store/status_store.ts";
import { runCli } from "../helpers/cli.ts";
import { tree } from "../helpers/tree.ts";
import {
  corruptSandboxFiles,
  corruptStatusFiles,
  plant,
  sandboxCheckpoint,
  statusRecord,
  withStateDir,
} from "../store/records.ts";

/**
 * Flags that keep verify inside the test's own directories: the manifest and file dirs are
 * siblings of the state dir that do not exist (nothing to check there), and no config file of
 * the machine is read.
 */
async function verifyArgs(stateDir: string, ...extra: string[]): Promise<string[]> {
  const none = `${stateDir}.absent`;
  const config = `${stateDir}.yaml`;
  await Deno.writeTextFile(config, "");
  return [
    "verify",
    "--config",
    config,
    "--state-dir",
    stateDir,
    ...["static-pod-dir", "inactive-dir", "secrets-dir", "configmaps-dir"]
      .flatMap((dir) => [`--${dir}`, `${none}/${dir}`]),
    ...extra,
  ];
}

async function configFor(stateDir: string) {
  return (await loadConfig((await verifyArgs(stateDir)).slice(1))).config;
}

async function populate(stateDir: string): Promise<void> {
  const statuses = await StatusStore.open(stateDir);
  await statuses.update("kube-system/etcd", () => statusRecord("kube-system/etcd"));
  await statuses.update(
    "kube-system/kube-apiserver",
    () =>
      statusRecord("kube-system/kube-apiserver", {
        state: "active-grace",
        graceEnd: "2026-01-01T00:01:00Z",
      }),
  );
  const sandboxes = await SandboxStore.open(stateDir);
  await sandboxes.create("abc123", sandboxCheckpoint());
}

Deno.test("verify: a sound state directory exits 0", async () => {
  await withStateDir(async (stateDir) => {
    await populate(stateDir);
    const r = await runCli(await verifyArgs(stateDir));
    assertEquals([r.code, r.stderr], [0, ""]);
    assertEquals(r.stdout, `ok: 3 files checked, all sound\n`);
  });
});

Deno.test("verify: stores never opened are empty, not broken", async () => {
  await withStateDir(async (stateDir) => {
    const r = await runCli(await verifyArgs(stateDir, "--json"));
    assertEquals(r.code, 0);
    assertEquals(JSON.parse(r.stdout), { stateDir, checked: 0, findings: [], sound: true });
  });
});

Deno.test("verify: every corrupt record is named, exit 1, nothing moved, the agent serves the rest", async () => {
  await withStateDir(async (stateDir) => {
    await populate(stateDir);
    const statusFiles = corruptStatusFiles(), sandboxFiles = corruptSandboxFiles();
    await plant(join(stateDir, "status"), statusFiles);
    await plant(join(stateDir, "sandboxes"), sandboxFiles);
    const before = await tree(stateDir, { stamps: true });

    const r = await runCli(await verifyArgs(stateDir));
    assertEquals(r.code, 1, r.stdout + r.stderr);
    const lines = r.stdout.trimEnd().split("\n");
    const expected = [
      ...statusFiles.map((f) => join(stateDir, "status", f.name)),
      ...sandboxFiles.map((f) => join(stateDir, "sandboxes", f.name)),
    ];
    for (const file of expected) {
      assertEquals(lines.filter((l) => l.startsWith(`${file}: `)).length, 1, file);
    }
    assertEquals(lines.length, expected.length + 1);
    assertEquals(
      lines.at(-1),
      `${expected.length} problems in ${expected.length + 3} files checked`,
    );
    assertEquals(await tree(stateDir, { stamps: true }), before, "verify is read-only");

    // The agent opening the same directory keeps every valid record and quarantines the rest.
    const statuses = await StatusStore.open(stateDir);
    assertEquals(statuses.list().map((s) => s.id), [
      "kube-system/etcd",
      "kube-system/kube-apiserver",
    ]);
    assertEquals(statuses.problems.length, statusFiles.length);
    assertEquals((await SandboxStore.open(stateDir)).list(), ["abc123"]);
    const after = await runCli(await verifyArgs(stateDir));
    assertEquals(after.code, 0, after.stdout);
  });
});

Deno.test("verify --json: findings as {file, problem}, one per bad file", async () => {
  await withStateDir(async (stateDir) => {
    await populate(stateDir);
    await plant(join(stateDir, "status"), [
      { name: "ns_torn.json", code: "bad-json", content: '{"version": "v1", "ki' },
    ]);
    const r = await runCli(await verifyArgs(stateDir, "--json"));
    assertEquals(r.code, 1);
    const report = JSON.parse(r.stdout);
    assertEquals(report.sound, false);
    assertEquals(report.checked, 4);
    assertEquals(report.findings.length, 1);
    assertEquals(report.findings[0].file, join(stateDir, "status", "ns_torn.json"));
    assert(/^not JSON: /.test(report.findings[0].problem), report.findings[0].problem);
  });
});

Deno.test("verify reports records and store directories that are not private", async () => {
  await withStateDir(async (stateDir) => {
    await populate(stateDir);
    await Deno.chmod(join(stateDir, "status", "kube-system_etcd.json"), 0o644);
    await Deno.chmod(join(stateDir, "sandboxes"), 0o755);
    const report = await runChecks(stateDir, checksFor(await configFor(stateDir)));
    assertEquals(report.findings, [
      {
        file: join(stateDir, "status", "kube-system_etcd.json"),
        problem: "mode 0644, expected 0600",
      },
      { file: join(stateDir, "sandboxes"), problem: "mode 0755, expected 0700" },
    ]);
  });
});

Deno.test("verify: a missing state directory is a finding, not an all-clear", async () => {
  await withStateDir(async (root) => {
    const missing = join(root, "typo");
    const r = await runCli(await verifyArgs(missing));
    assertEquals(r.code, 1);
    assertEquals(
      r.stdout,
      `${missing}: no such directory\n1 problem in 0 files checked\n`,
    );
  });
});

Deno.test("verify --output json like every command; --json is the same, and not with --output text", async () => {
  await withStateDir(async (stateDir) => {
    await populate(stateDir);
    const json = await runCli(await verifyArgs(stateDir, "--output", "json"));
    assertEquals([json.code, json.stderr], [0, ""]);
    assertEquals(JSON.parse(json.stdout), { stateDir, checked: 3, findings: [], sound: true });
    for (const alias of [["--json"], ["--json", "--output", "json"]]) {
      const same = await runCli(await verifyArgs(stateDir, ...alias));
      assertEquals([same.code, same.stdout], [0, json.stdout], alias.join(" "));
    }
    const text = await runCli(await verifyArgs(stateDir, "--output", "text"));
    assertEquals([text.code, text.stdout], [0, "ok: 3 files checked, all sound\n"]);

    const both = await runCli(await verifyArgs(stateDir, "--json", "--output", "text"));
    assertEquals([both.code, both.stdout], [2, ""]);
    assertEquals(
      both.stderr,
      "ckpt-agent verify: --json: the same as --output json, not with --output text\n",
    );
    const bad = await runCli(await verifyArgs(stateDir, "--output", "yaml"));
    assertEquals(bad.code, 2);
    assertEquals(bad.stderr, 'ckpt-agent verify: --output: must be text or json, not "yaml"\n');
  });
});

Deno.test("verify: bad flags exit 2", async () => {
  for (const args of [["--bogus"], ["--state-dir"], ["--state-dir", ""], ["--json=yes"]]) {
    const r = await runCli(["verify", ...args]);
    assertEquals(r.code, 2, args.join(" "));
    assert(r.stderr.startsWith("ckpt-agent verify: "), r.stderr);
    assertEquals(r.stdout, "");
  }
});
