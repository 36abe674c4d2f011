/**
 * The systemd unit as systemd itself reads it: `systemd-analyze verify` on the unit install.sh
 * stages (ExecStart resolved inside the staging root), `systemd-analyze security` for the
 * exposure score, and the unit's promises checked against the shipped configuration.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { dirname } from "node:path";
import { parse as parseYaml } from "yaml";
import { AGENT_MALLOC_ENV } from "../../scripts/permissions.ts";
import { governingRule, pathRules, sectionEntries } from "../../lib/doctor/systemd_unit.ts";
import { CONFIG_FILE, installSh, run, type Staging, UNIT_FILE, withStaging } from "./tools.ts";

const MAX_EXPOSURE = 2.2;

/** The host's vendor units, which `verify --root` needs for sysinit.target and friends. */
async function hostUnitDir(): Promise<string> {
  for (const dir of ["/usr/lib/systemd/system", "/lib/systemd/system"]) {
    try {
      await Deno.lstat(`${dir}/sysinit.target`);
      return dir;
    } catch {
      // the next candidate
    }
  }
  throw new Error("no systemd unit directory with sysinit.target on this machine");
}

async function stageWithVendorUnits(s: Staging, layout: string[]) {
  const staged = await installSh(["--root", s.root, "--binary", s.binary, ...layout]);
  assertEquals(staged.code, 0, staged.stderr);
  await Deno.mkdir(`${s.root}/usr/lib/systemd/system`, { recursive: true });
  const copy = await run("cp", [
    "-a",
    `${await hostUnitDir()}/.`,
    `${s.root}/usr/lib/systemd/system`,
  ]);
  assertEquals(copy.code, 0, copy.stderr);
}

/**
 * verify also runs `man` for each man: page of Documentation=, outside the root: MANPATH makes it
 * look where install.sh staged the page.
 */
function verify(root: string) {
  return run("systemd-analyze", ["verify", `--root=${root}`, "ckpt-agent.service"], {
    env: { MANPATH: `${root}/usr/local/share/man:${root}/usr/share/man` },
  });
}

for (
  const { layout, binary } of [
    { layout: [], binary: "/usr/local/bin/ckpt-agent" },
    { layout: ["--package"], binary: "/usr/bin/ckpt-agent" },
  ]
) {
  Deno.test(`systemd-analyze verify accepts the unit of ${["install.sh", ...layout].join(" ")}, and checks its ExecStart`, async () => {
    await withStaging(async (s) => {
      await stageWithVendorUnits(s, layout);
      const r = await verify(s.root);
      // verify exits 0 on warnings such as an unknown key: any output is a failure.
      assertEquals({ code: r.code, output: r.stdout + r.stderr }, { code: 0, output: "" });

      // It really looks at the staged binary: without it, the same unit fails.
      await Deno.remove(`${s.root}${binary}`);
      const missing = await verify(s.root);
      assert(missing.code !== 0);
      assert(missing.stderr.includes(binary), missing.stderr);
    });
  });
}

Deno.test(`systemd-analyze security rates the unit's exposure ${MAX_EXPOSURE} or lower`, async () => {
  const r = await run("systemd-analyze", ["security", "--offline=true", UNIT_FILE]);
  const m = /Overall exposure level for ckpt-agent\.service: (\d+(?:\.\d+)?) /.exec(r.stdout);
  assert(m, `no exposure line in:\n${r.stdout}${r.stderr}`);
  const exposure = Number(m[1]);
  assert(exposure <= MAX_EXPOSURE, `exposure ${exposure} > ${MAX_EXPOSURE}:\n${r.stdout}`);
});

/** key → values, in order, of one section of the shipped unit, as doctor reads a unit. */
async function unitSection(section: string) {
  return sectionEntries([await Deno.readTextFile(UNIT_FILE)], section);
}

Deno.test("the unit starts without the kubelet or the network and never gives up", async () => {
  const unit = await unitSection("Unit");
  for (const key of ["Requires", "Requisite", "BindsTo", "Wants", "After", "PartOf", "Upholds"]) {
    for (const blocked of ["kubelet.service", "network-online.target"]) {
      assert(!(unit.get(key) ?? []).includes(blocked), `${key}=${blocked}`);
    }
  }
  assertEquals(unit.get("Requires"), undefined);
  assertEquals(unit.get("StartLimitIntervalSec"), ["0"]);
  const service = await unitSection("Service");
  assertEquals(service.get("Restart"), ["always"]);
  assertEquals(service.get("ExecStart"), [
    "/usr/local/bin/ckpt-agent",
    "run",
    "--config",
    "/etc/ckpt-agent/config.yaml",
  ]);
});

Deno.test("the unit gives the daemon the allocator settings the benchmarks measured", async () => {
  const service = await unitSection("Service");
  assertEquals(
    service.get("Environment"),
    Object.entries(AGENT_MALLOC_ENV).map(([name, value]) => `${name}=${value}`),
  );
});

/** The shipped configuration's defaults: the file carries them as comments "# key: value". */
async function shippedDefaults(): Promise<Record<string, string>> {
  const commented = (await Deno.readTextFile(CONFIG_FILE)).split("\n")
    .filter((line) => /^# [A-Za-z]+:( |$)/.test(line))
    .map((line) => line.slice(2))
    .join("\n");
  return parseYaml(commented) as Record<string, string>;
}

/** The entry that decides whether the unit can write `path` (each entry is a mount of its own). */
async function governingEntry(path: string) {
  return governingRule(pathRules(await unitSection("Service")), path);
}

Deno.test("the unit can write every default path of the shipped configuration", async () => {
  const defaults = await shippedDefaults();
  for (const key of ["staticPodDir", "inactiveDir", "secretsDir", "configmapsDir"]) {
    const entry = await governingEntry(defaults[key]);
    assert(entry?.entry.startsWith("ReadWritePaths="), `${key}: ${defaults[key]}: ${entry?.entry}`);
  }
  assertEquals((await governingEntry(defaults.stateDir))?.entry, "StateDirectory=ckpt-agent");
  assertEquals(
    (await governingEntry(dirname(defaults.lockFile)))?.entry,
    "RuntimeDirectory=ckpt-agent",
  );
});

Deno.test("the default lock is in the unit's runtime directory, root's alone and kept across stops; /run/lock is not writable", async () => {
  // In the world-writable /run/lock, any local user could hold the lock (docs/design.md#lock).
  const defaults = await shippedDefaults();
  const service = await unitSection("Service");
  assertEquals(dirname(defaults.lockFile), `/run/${service.get("RuntimeDirectory")}`);
  assertEquals(service.get("RuntimeDirectoryMode"), ["0700"]);
  // Removed at each stop, it would take the lock file from under an operator's `--once`.
  assertEquals(service.get("RuntimeDirectoryPreserve"), ["yes"]);
  assertEquals((await governingEntry("/run/lock"))?.writable, false);
});

Deno.test("the static-pod dir and the inactive dir are one mount, so activation can hard-link", async () => {
  // link(2) fails with EXDEV across mount points, even of one file system: activation would
  // copy instead, and fail on a full disk.
  const defaults = await shippedDefaults();
  const active = await governingEntry(defaults.staticPodDir);
  assertEquals(await governingEntry(defaults.inactiveDir), active);
  assert(active?.writable && active.entry.startsWith("ReadWritePaths="), active?.entry);
});
