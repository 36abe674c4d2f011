/**
 * The unit's writable paths as systemd loads them: the unit file and its drop-ins from a search
 * path in a temp directory (as `$SYSTEMD_UNIT_PATH` points systemd at one), the shipped unit
 * among them.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { defaultConfig } from "../../lib/config/load.ts";
import type { Config } from "../../lib/config/types.ts";
import {
  findUnitFiles,
  governingRule,
  pathRules,
  sectionEntries,
  SYSTEM_UNIT_PATH,
  UNIT_NAME,
  unitFindings,
  unitSearchPath,
} from "../../lib/doctor/systemd_unit.ts";
import { withTempDir } from "../helpers/temp_dir.ts";

const SHIPPED_UNIT = new URL("../../systemd/ckpt-agent.service", import.meta.url);

Deno.test("sectionEntries: lists add up across drop-ins, an empty assignment empties them", () => {
  const unit = [
    "# comment",
    "[Unit]",
    "ReadWritePaths=/not/the/service",
    "[Service]",
    "ReadWritePaths=-/etc/kubernetes /run/lock",
    "; another comment",
    'Environment="A=1 2" B=3',
    "ExecStart=/usr/local/bin/ckpt-agent run \\",
    "  --config /etc/ckpt-agent/config.yaml",
  ].join("\n");
  const dropIn = ["[Service]", "ReadWritePaths=/srv/extra", "Environment=", "Environment=C=4"]
    .join("\n");
  const service = sectionEntries([unit, dropIn], "Service");
  assertEquals(service.get("ReadWritePaths"), ["-/etc/kubernetes", "/run/lock", "/srv/extra"]);
  assertEquals(service.get("Environment"), ["C=4"]);
  assertEquals(service.get("ExecStart"), [
    "/usr/local/bin/ckpt-agent",
    "run",
    "--config",
    "/etc/ckpt-agent/config.yaml",
  ]);
  assertEquals(sectionEntries([unit], "Service").get("Environment"), ["A=1 2", "B=3"]);
  const reset = sectionEntries([unit, "[Service]\nReadWritePaths=\n"], "Service");
  assertEquals(reset.get("ReadWritePaths"), []);
});

Deno.test("unitSearchPath follows $SYSTEMD_UNIT_PATH as systemd does", () => {
  assertEquals(unitSearchPath(undefined), SYSTEM_UNIT_PATH);
  assertEquals(unitSearchPath(""), SYSTEM_UNIT_PATH);
  assertEquals(unitSearchPath("/a:/b"), ["/a", "/b"]);
  assertEquals(unitSearchPath("/a:"), ["/a", ...SYSTEM_UNIT_PATH]);
});

Deno.test("governingRule: the most specific entry decides, ProtectSystem= below them all", () => {
  const rules = pathRules(
    sectionEntries([Deno.readTextFileSync(SHIPPED_UNIT)], "Service"),
  );
  const entry = (path: string) => governingRule(rules, path)?.entry;
  assertEquals(entry("/etc/kubernetes/manifests"), "ReadWritePaths=-/etc/kubernetes");
  assertEquals(entry("/etc/kubernetes/pki/ca.crt"), "ReadOnlyPaths=-/etc/kubernetes/pki");
  assertEquals(entry("/etc/kubernetes-old"), "ProtectSystem=strict");
  assertEquals(entry("/var/lib/ckpt-agent"), "StateDirectory=ckpt-agent");
  assertEquals(entry("/run/ckpt-agent/admin.sock"), "RuntimeDirectory=ckpt-agent");
  assertEquals(governingRule(pathRules(new Map()), "/etc"), undefined);
  const full = pathRules(new Map([["ProtectSystem", ["full"]]]));
  assertEquals(governingRule(full, "/etc/kubernetes")?.writable, false);
  assertEquals(governingRule(full, "/var/lib/x"), undefined);
});

/** A search path of two directories, as /etc/systemd/system and /usr/lib/systemd/system. */
async function withUnitDirs(fn: (etc: string, lib: string, root: string) => Promise<void>) {
  await withTempDir(async (root) => {
    const [etc, lib] = [join(root, "etc/systemd/system"), join(root, "usr/lib/systemd/system")];
    await Deno.mkdir(etc, { recursive: true });
    await Deno.mkdir(lib, { recursive: true });
    await fn(etc, lib, root);
  });
}

async function dropIn(dir: string, name: string, text: string) {
  await Deno.mkdir(join(dir, `${UNIT_NAME}.d`), { recursive: true });
  await Deno.writeTextFile(join(dir, `${UNIT_NAME}.d`, name), text);
}

Deno.test("findUnitFiles: the first unit in the search path, drop-ins by name, earlier ones hiding later ones", async () => {
  await withUnitDirs(async (etc, lib) => {
    assertEquals(await findUnitFiles([etc, lib]), undefined);
    await Deno.copyFile(SHIPPED_UNIT, join(lib, UNIT_NAME));
    await dropIn(lib, "50-paths.conf", "[Service]\n");
    await dropIn(lib, "10-env.conf", "[Service]\n");
    await dropIn(etc, "50-paths.conf", "[Service]\n");
    await dropIn(etc, "override.conf", "[Service]\n");
    assertEquals(await findUnitFiles([etc, lib]), {
      unit: join(lib, UNIT_NAME),
      dropIns: [
        join(lib, `${UNIT_NAME}.d/10-env.conf`),
        join(etc, `${UNIT_NAME}.d/50-paths.conf`),
        join(etc, `${UNIT_NAME}.d/override.conf`),
      ],
    });
    await Deno.copyFile(SHIPPED_UNIT, join(etc, UNIT_NAME));
    assertEquals((await findUnitFiles([etc, lib]))?.unit, join(etc, UNIT_NAME));
  });
});

function configUnder(root: string, overrides: Partial<Config> = {}): Config {
  return { ...defaultConfig("cp-1"), ...overrides, kubeconfig: join(root, "kubeconfig") };
}

Deno.test("the shipped unit can write every default directory, the static-pod and inactive dirs through one entry", async () => {
  await withUnitDirs(async (etc, lib, root) => {
    await Deno.copyFile(SHIPPED_UNIT, join(lib, UNIT_NAME));
    const findings = await unitFindings(configUnder(root), [etc, lib]);
    assertEquals(findings.map((f) => [f.level, f.subject]), [
      ["ok", "/etc/kubernetes/manifests"],
      ["ok", "/etc/kubernetes/inactive-manifests"],
      ["ok", "/etc/kubernetes/checkpoint-secrets"],
      ["ok", "/etc/kubernetes/checkpoint-configmaps"],
      ["ok", "/var/lib/ckpt-agent"],
      ["ok", "/run/ckpt-agent"],
      ["ok", "/etc/kubernetes/manifests, /etc/kubernetes/inactive-manifests"],
    ]);
    assert(findings[0].found.includes("ReadWritePaths=-/etc/kubernetes"), findings[0].found);
    assert(findings[4].found.includes("StateDirectory=ckpt-agent"), findings[4].found);
    assert(findings[5].found.includes("RuntimeDirectory=ckpt-agent"), findings[5].found);
  });
});

Deno.test("moved directories the unit cannot write, and two entries for the manifest dirs, are named with the drop-in to add", async () => {
  await withUnitDirs(async (etc, lib, root) => {
    await Deno.copyFile(SHIPPED_UNIT, join(lib, UNIT_NAME));
    const config = configUnder(root, {
      staticPodDir: "/srv/kubernetes/manifests",
      inactiveDir: "/srv/checkpoints/inactive",
      stateDir: "/srv/state",
    });
    const byPath = async () =>
      new Map((await unitFindings(config, [etc, lib])).map((f) => [f.subject, f]));
    let findings = await byPath();
    const pods = findings.get("/srv/kubernetes/manifests")!;
    assertEquals(pods.level, "error");
    assert(pods.found.includes("ProtectSystem=strict makes it read-only"), pods.found);
    assert(pods.fix?.includes("ReadWritePaths=-/srv/kubernetes/manifests"), pods.fix);
    // Without the state dir the agent goes on from memory: a warning.
    assertEquals(findings.get("/srv/state")?.level, "warning");

    // `systemctl edit ckpt-agent`, one entry per directory: writable, but two mounts.
    await dropIn(
      etc,
      "override.conf",
      "[Service]\nReadWritePaths=/srv/kubernetes/manifests /srv/checkpoints/inactive /srv/state\n",
    );
    findings = await byPath();
    assertEquals(findings.get("/srv/kubernetes/manifests")?.level, "ok");
    assertEquals(findings.get("/srv/state")?.level, "ok");
    const both = findings.get("/srv/kubernetes/manifests, /srv/checkpoints/inactive")!;
    assertEquals(both.level, "warning");
    assert(both.found.includes("separately"), both.found);
    assert(both.fix?.includes("ReadWritePaths=-/srv"), both.fix);

    // One entry that holds both.
    await dropIn(etc, "override.conf", "[Service]\nReadWritePaths=/srv\n");
    findings = await byPath();
    assertEquals(
      [...findings.values()].filter((f) => f.level !== "ok").map((f) => f.subject),
      [],
    );
  });
});

Deno.test("a lock file the unit cannot write: a warning that points back into its runtime directory", async () => {
  await withUnitDirs(async (etc, lib, root) => {
    await Deno.copyFile(SHIPPED_UNIT, join(lib, UNIT_NAME));
    // The old default: the system's world-writable /run/lock is no place for the lock.
    const config = configUnder(root, { lockFile: "/run/lock/ckpt-agent.lock" });
    const lock = (await unitFindings(config, [etc, lib])).find((f) => f.subject === "/run/lock")!;
    assertEquals(lock.level, "warning");
    assert(lock.found.includes("ProtectSystem=strict makes it read-only"), lock.found);
    assert(
      lock.fix?.startsWith(
        "move lockFile into the unit's RuntimeDirectory= (the default /run/ckpt-agent/lock), or",
      ),
      lock.fix,
    );
  });
});

Deno.test("no unit, or a masked one: not checked, a warning", async () => {
  await withUnitDirs(async (etc, lib, root) => {
    const [none] = await unitFindings(configUnder(root), [etc, lib]);
    assertEquals([none.level, none.subject], ["warning", UNIT_NAME]);
    assert(none.found.startsWith("not checked"), none.found);
    await Deno.copyFile(SHIPPED_UNIT, join(lib, UNIT_NAME));
    await Deno.symlink("/dev/null", join(etc, UNIT_NAME));
    const [masked] = await unitFindings(configUnder(root), [etc, lib]);
    assertEquals(masked.level, "warning");
    assert(masked.found.includes("masked"), masked.found);
  });
});
