/** install.sh into a staging root: the layout and modes, idempotence, uninstall, purge, errors. */
import { deepStrictEqual as assertEquals, ok as assert, rejects } from "node:assert/strict";
import { defaultConfig } from "../../lib/config/load.ts";
import {
  ALERT_RULES,
  CONFIG_FILE,
  INSTALL_SH,
  installSh,
  type Listing,
  listTree,
  MAN_PAGE_FILE,
  run,
  type RunResult,
  sha256File,
  type Staging,
  UNIT_FILE,
  withStaging,
} from "./tools.ts";

const ACTIVE_CHECKPOINT = "etc/kubernetes/manifests/kube-system-kube-apiserver.json";
/** Where the agent and the verbs look for the token by default: where the installs make it. */
const ADMIN_TOKEN = defaultConfig("cp-1").adminTokenFile.slice(1);
const FOREIGN_MANIFEST = "etc/kubernetes/manifests/etcd.yaml";

async function install(s: Staging, ...extra: string[]) {
  const r = await installSh(["--root", s.root, "--binary", s.binary, ...extra]);
  assertEquals(r.stderr, "");
  assertEquals(r.code, 0);
  return r.stdout;
}

/** The status word install.sh printed for each path (relative to the root). */
function statuses(stdout: string, root: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of stdout.trimEnd().split("\n").slice(0, -1)) {
    const at = line.indexOf(` ${root}/`);
    out[line.slice(at + root.length + 2)] = line.slice(0, at).trim();
  }
  return out;
}

function ok(r: RunResult) {
  assertEquals(r.code, 0, r.stderr);
}

function without(listing: Listing, ...paths: string[]): Listing {
  return Object.fromEntries(
    Object.entries(listing).filter(([p]) => !paths.some((x) => p === x || p.startsWith(`${x}/`))),
  );
}

/** An installed node with some state: checkpoints, their secrets, a record, an admin token, the lock. */
async function populate(root: string) {
  const files: Record<string, string> = {
    [ACTIVE_CHECKPOINT]:
      '{"metadata":{"annotations":{"checkpointer.alpha.coreos.com/checkpoint-of":"kube-apiserver"}}}',
    [FOREIGN_MANIFEST]: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: etcd\n",
    "etc/kubernetes/inactive-manifests/kube-system-kube-apiserver.json": "{}",
    "etc/kubernetes/checkpoint-secrets/kube-system/kube-apiserver/tls/key": "secret",
    "etc/kubernetes/checkpoint-configmaps/kube-system/kube-apiserver/cfg/a": "value",
    "var/lib/ckpt-agent/status.json": "{}",
    [ADMIN_TOKEN]: "token",
    "etc/systemd/system/ckpt-agent.service.d/override.conf": "[Service]\nRestartSec=1s\n",
    "run/ckpt-agent/lock": "",
  };
  for (const [path, text] of Object.entries(files)) {
    await Deno.mkdir(`${root}/${path.slice(0, path.lastIndexOf("/"))}`, { recursive: true });
    await Deno.writeTextFile(`${root}/${path}`, text);
  }
}

/** The staged admin token: random, so checked for its form and then left out of the listing. */
async function tokenOf(s: Staging, listing: Listing): Promise<string> {
  const token = await Deno.readTextFile(`${s.root}/${ADMIN_TOKEN}`);
  assert(/^[0-9a-f]{64}\n$/.test(token), token);
  assertEquals(listing[ADMIN_TOKEN], `file 0600 ${await sha256File(`${s.root}/${ADMIN_TOKEN}`)}`);
  // Root's when install.sh runs as root, as it does on a node.
  assertEquals((await Deno.lstat(`${s.root}/${ADMIN_TOKEN}`)).uid, Deno.uid());
  delete listing[ADMIN_TOKEN];
  return token;
}

Deno.test("install.sh stages every file and directory with its mode", async () => {
  await withStaging(async (s) => {
    const stdout = await install(s);
    const dir = "dir 0755";
    const secretDir = "dir 0700";
    const listing = await listTree(s.root);
    await tokenOf(s, listing);
    assertEquals(listing, {
      "etc": dir,
      "etc/ckpt-agent": dir,
      "etc/ckpt-agent/config.yaml": `file 0644 ${await sha256File(CONFIG_FILE)}`,
      "etc/kubernetes": dir,
      "etc/kubernetes/checkpoint-configmaps": secretDir,
      "etc/kubernetes/checkpoint-secrets": secretDir,
      "etc/kubernetes/inactive-manifests": secretDir,
      "etc/kubernetes/manifests": dir,
      "etc/systemd": dir,
      "etc/systemd/system": dir,
      "etc/systemd/system/ckpt-agent.service": `file 0644 ${await sha256File(UNIT_FILE)}`,
      "usr": dir,
      "usr/local": dir,
      "usr/local/bin": dir,
      "usr/local/bin/ckpt-agent": `file 0755 ${await sha256File(s.binary)}`,
      "usr/local/share": dir,
      "usr/local/share/ckpt-agent": dir,
      "usr/local/share/ckpt-agent/prometheus": dir,
      "usr/local/share/ckpt-agent/prometheus/ckpt-agent.rules.yml": `file 0644 ${await sha256File(
        ALERT_RULES,
      )}`,
      "usr/local/share/man": dir,
      "usr/local/share/man/man8": dir,
      "usr/local/share/man/man8/ckpt-agent.8": `file 0644 ${await sha256File(MAN_PAGE_FILE)}`,
      "var": dir,
      "var/lib": dir,
      "var/lib/ckpt-agent": secretDir,
    });
    assertEquals(stdout.trimEnd().split("\n").at(-1), "ckpt-agent: 13 change(s)");
    // The installed binary is the agent's entry point, and runs.
    const help = await run(`${s.root}/usr/local/bin/ckpt-agent`, ["--help"]);
    assertEquals(help.code, 0);
    assert(help.stdout.startsWith("usage: ckpt-agent"), help.stdout);
  });
});

Deno.test("a second install changes nothing and says so", async () => {
  await withStaging(async (s) => {
    await install(s);
    const before = await listTree(s.root);
    const stdout = await install(s);
    assertEquals(await listTree(s.root), before);
    const words = new Set(Object.values(statuses(stdout, s.root)));
    assertEquals(words, new Set(["unchanged"]));
    assertEquals(stdout.trimEnd().split("\n").at(-1), "ckpt-agent: unchanged");
  });
});

Deno.test("install keeps an edited config and the kubelet's directory, fixes our modes", async () => {
  await withStaging(async (s) => {
    const config = `${s.root}/etc/ckpt-agent/config.yaml`;
    await Deno.mkdir(`${s.root}/etc/ckpt-agent`, { recursive: true });
    await Deno.writeTextFile(config, "pollInterval: 10s\n", { mode: 0o600 });
    await Deno.chmod(config, 0o600);
    await Deno.mkdir(`${s.root}/etc/kubernetes/manifests`, { recursive: true, mode: 0o750 });
    await Deno.chmod(`${s.root}/etc/kubernetes/manifests`, 0o750);
    await Deno.writeTextFile(`${s.root}/${FOREIGN_MANIFEST}`, "kind: Pod\n");
    await Deno.mkdir(`${s.root}/etc/kubernetes/checkpoint-secrets`, { mode: 0o755 });
    await Deno.chmod(`${s.root}/etc/kubernetes/checkpoint-secrets`, 0o755);

    const stdout = await install(s);
    const listing = await listTree(s.root);
    assertEquals(listing["etc/ckpt-agent/config.yaml"], `file 0600 ${await sha256File(config)}`);
    assertEquals(await Deno.readTextFile(config), "pollInterval: 10s\n");
    assertEquals(listing["etc/kubernetes/manifests"], "dir 0750");
    assertEquals(await Deno.readTextFile(`${s.root}/${FOREIGN_MANIFEST}`), "kind: Pod\n");
    assertEquals(listing["etc/kubernetes/checkpoint-secrets"], "dir 0700");
    const status = statuses(stdout, s.root);
    assertEquals(status["etc/ckpt-agent/config.yaml"], "kept");
    assertEquals(status["etc/kubernetes/manifests"], "unchanged");
    assertEquals(status["etc/kubernetes/checkpoint-secrets"], "mode 0700");
  });
});

Deno.test("the admin token is made once: kept by every later install, whatever it holds; purge removes it", async () => {
  await withStaging(async (s) => {
    await install(s);
    const first = await tokenOf(s, await listTree(s.root));
    await install(s);
    assertEquals(await tokenOf(s, await listTree(s.root)), first);
    // An operator's token (rotated, say) is theirs, even one the agent would refuse.
    const path = `${s.root}/${ADMIN_TOKEN}`;
    await Deno.writeTextFile(path, "operator's\n", { mode: 0o640 });
    await Deno.chmod(path, 0o640);
    const stdout = await install(s);
    assertEquals(statuses(stdout, s.root)[ADMIN_TOKEN], "unchanged");
    assertEquals(await Deno.readTextFile(path), "operator's\n");
    ok(await installSh(["--root", s.root, "--uninstall"]));
    assertEquals(await Deno.readTextFile(path), "operator's\n");
    ok(await installSh(["--root", s.root, "--uninstall", "--purge"]));
    await rejects(Deno.lstat(path), Deno.errors.NotFound);
  });
});

Deno.test("--admin-token, as the Debian package's postinst runs it, makes the token alone, once", async () => {
  await withStaging(async (s) => {
    const only = await installSh(["--root", s.root, "--admin-token"]);
    assertEquals(only.stdout, `created    ${s.root}/${ADMIN_TOKEN}\nckpt-agent: 1 change(s)\n`);
    const listing = await listTree(s.root);
    const made = await tokenOf(s, listing);
    assertEquals(listing, { "etc": "dir 0755", "etc/ckpt-agent": "dir 0755" });
    const again = await installSh(["--root", s.root, "--admin-token"]);
    assertEquals(again.stdout.trimEnd().split("\n").at(-1), "ckpt-agent: unchanged");
    assertEquals(await Deno.readTextFile(`${s.root}/${ADMIN_TOKEN}`), made);
  });
});

Deno.test("a new binary replaces the old one in place, leaving no temp file", async () => {
  await withStaging(async (s) => {
    await install(s);
    const before = await listTree(s.root);
    await Deno.writeTextFile(s.binary, "#!/bin/sh\necho new\n");
    const stdout = await install(s);
    assertEquals(statuses(stdout, s.root)["usr/local/bin/ckpt-agent"], "updated");
    assertEquals(await listTree(s.root), {
      ...before,
      "usr/local/bin/ckpt-agent": `file 0755 ${await sha256File(s.binary)}`,
    });
  });
});

Deno.test("the binary defaults to dist/ckpt-agent next to the script, whatever the cwd", async () => {
  await withStaging(async (s) => {
    const pkg = `${s.dir}/pkg`;
    await Deno.mkdir(`${pkg}/systemd`, { recursive: true });
    await Deno.mkdir(`${pkg}/dist`);
    await Deno.mkdir(`${pkg}/prometheus`);
    await Deno.mkdir(`${pkg}/docs`);
    await Deno.copyFile(ALERT_RULES, `${pkg}/prometheus/ckpt-agent.rules.yml`);
    await Deno.copyFile(MAN_PAGE_FILE, `${pkg}/docs/ckpt-agent.8`);
    await Deno.copyFile(UNIT_FILE, `${pkg}/systemd/ckpt-agent.service`);
    await Deno.copyFile(CONFIG_FILE, `${pkg}/systemd/config.yaml`);
    await Deno.copyFile(s.binary, `${pkg}/dist/ckpt-agent`);
    await Deno.chmod(`${pkg}/dist/ckpt-agent`, 0o755);
    const script = `${pkg}/install.sh`;
    await Deno.copyFile(INSTALL_SH, script);
    await Deno.chmod(script, 0o755);

    const r = await run(script, ["--root", s.root], { cwd: "/" });
    assertEquals(r.code, 0, r.stderr);
    assertEquals(
      await sha256File(`${s.root}/usr/local/bin/ckpt-agent`),
      await sha256File(s.binary),
    );
  });
});

Deno.test("uninstall removes binary, unit and rules, keeps config, state and checkpoints", async () => {
  await withStaging(async (s) => {
    await install(s);
    await populate(s.root);
    const before = await listTree(s.root);
    const r = await installSh(["--root", s.root, "--uninstall"]);
    assertEquals(r.code, 0, r.stderr);
    assertEquals(
      await listTree(s.root),
      without(
        before,
        "usr/local/bin/ckpt-agent",
        "etc/systemd/system/ckpt-agent.service",
        "usr/local/share/ckpt-agent",
        "usr/local/share/man/man8/ckpt-agent.8",
      ),
    );
    // The active checkpoint keeps running under the kubelet with nothing to withdraw it: said.
    assert(r.stderr.includes(`${s.root}/${ACTIVE_CHECKPOINT}`), r.stderr);
    const again = await installSh(["--root", s.root, "--uninstall"]);
    assertEquals(again.code, 0);
    assertEquals(again.stdout.trimEnd().split("\n").at(-1), "ckpt-agent: unchanged");
  });
});

Deno.test("purge refuses, changing nothing, while the kubelet may run a checkpoint", async () => {
  await withStaging(async (s) => {
    await install(s);
    await populate(s.root);
    const before = await listTree(s.root);
    const r = await installSh(["--root", s.root, "--uninstall", "--purge"]);
    assertEquals(r.code, 1);
    assertEquals(r.stdout, "");
    assert(r.stderr.startsWith("install.sh: refusing to purge"), r.stderr);
    assert(r.stderr.includes(`${s.root}/${ACTIVE_CHECKPOINT}`), r.stderr);
    assert(!r.stderr.includes("etcd.yaml"), r.stderr);
    assertEquals(await listTree(s.root), before);
  });
});

Deno.test("purge removes our files, never the kubelet's directory or manifests", async () => {
  await withStaging(async (s) => {
    await install(s);
    await populate(s.root);
    await Deno.remove(`${s.root}/${ACTIVE_CHECKPOINT}`);
    // A temp file the agent left when it crashed mid-write (lib/disk/atomic_write.ts).
    const temp = "etc/kubernetes/manifests/.kube-system-kube-apiserver.json.ckpt-tmp-42";
    await Deno.writeTextFile(`${s.root}/${temp}`, "{");
    await Deno.chmod(`${s.root}/etc/kubernetes/manifests`, 0o750);
    const before = await listTree(s.root);

    const r = await installSh(["--root", s.root, "--uninstall", "--purge"]);
    assertEquals(r.code, 0, r.stderr);
    assertEquals(r.stderr, "");
    assertEquals(
      await listTree(s.root),
      without(
        before,
        "usr/local/bin/ckpt-agent",
        "etc/systemd/system/ckpt-agent.service",
        "usr/local/share/ckpt-agent",
        "usr/local/share/man/man8/ckpt-agent.8",
        "etc/systemd/system/ckpt-agent.service.d",
        "etc/ckpt-agent",
        "var/lib/ckpt-agent",
        "etc/kubernetes/inactive-manifests",
        "etc/kubernetes/checkpoint-secrets",
        "etc/kubernetes/checkpoint-configmaps",
        "run/ckpt-agent",
        temp,
      ),
    );
    assertEquals(before["etc/kubernetes/manifests"], "dir 0750");
    assert(FOREIGN_MANIFEST in before);

    const again = await installSh(["--root", s.root, "--uninstall", "--purge"]);
    assertEquals(again.code, 0);
    assertEquals(new Set(Object.values(statuses(again.stdout, s.root))), new Set(["absent"]));
  });
});

Deno.test("--package stages the Debian package's layout: /usr, a vendor unit, no kubelet dir", async () => {
  await withStaging(async (s) => {
    await install(s, "--package");
    const listing = await listTree(s.root);
    const files = Object.entries(listing).filter(([, kind]) => kind.startsWith("file "));
    // No admin token: each node makes its own (the package's postinst).
    assertEquals(files.map(([path]) => path), [
      "etc/ckpt-agent/config.yaml",
      "usr/bin/ckpt-agent",
      "usr/lib/systemd/system/ckpt-agent.service",
      "usr/share/ckpt-agent/prometheus/ckpt-agent.rules.yml",
      "usr/share/man/man8/ckpt-agent.8",
    ]);
    assertEquals(listing["usr/bin/ckpt-agent"], `file 0755 ${await sha256File(s.binary)}`);
    assert(!("etc/kubernetes/manifests" in listing));
    for (const dir of ["inactive-manifests", "checkpoint-secrets", "checkpoint-configmaps"]) {
      assertEquals(listing[`etc/kubernetes/${dir}`], "dir 0700");
    }
    // The unit as shipped, but for the binary its ExecStart runs.
    const shipped = (await Deno.readTextFile(UNIT_FILE)).split("\n");
    const staged = (await Deno.readTextFile(
      `${s.root}/usr/lib/systemd/system/ckpt-agent.service`,
    )).split("\n");
    const changed = shipped.flatMap((line, i) => line === staged[i] ? [] : [[line, staged[i]]]);
    assertEquals(changed, [[
      "ExecStart=/usr/local/bin/ckpt-agent run --config /etc/ckpt-agent/config.yaml",
      "ExecStart=/usr/bin/ckpt-agent run --config /etc/ckpt-agent/config.yaml",
    ]]);
    assertEquals(staged.length, shipped.length);

    const r = await installSh(["--root", s.root, "--package", "--uninstall"]);
    assertEquals(r.code, 0, r.stderr);
    const left = await listTree(s.root);
    assertEquals(
      Object.keys(left).filter((path) => path.startsWith("usr/") && left[path] !== "dir 0755"),
      [],
    );
    assert("etc/ckpt-agent/config.yaml" in left);
  });
});

Deno.test("a missing binary is a clear error, and nothing is staged", async () => {
  await withStaging(async (s) => {
    const r = await installSh(["--root", s.root, "--binary", `${s.dir}/nope`]);
    assertEquals(r.code, 1);
    assertEquals(r.stdout, "");
    assert(r.stderr.startsWith(`install.sh: binary not found: ${s.dir}/nope`), r.stderr);
    await rejects(Deno.lstat(s.root), Deno.errors.NotFound);
  });
});

Deno.test("without --root, install.sh refuses to run as a user other than root", async () => {
  await withStaging(async (s) => {
    // A copy in a directory anyone can read: the repository may sit in a private home.
    const script = `${s.dir}/install.sh`;
    await Deno.copyFile(INSTALL_SH, script);
    await Deno.chmod(script, 0o755);
    await Deno.chmod(s.dir, 0o755);
    const asNobody = Deno.uid() !== 0
      ? [script]
      : (await run("sh", ["-c", "command -v setpriv"])).code === 0
      ? ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", script]
      : ["runuser", "-u", "nobody", "--", script];
    const [program, ...args] = asNobody;
    const r = await run(program, [...args, "--binary", s.binary], { cwd: s.dir });
    assertEquals(r.code, 1);
    assertEquals(r.stdout, "");
    assertEquals(
      r.stderr,
      "install.sh: must run as root to install on this node (or stage into a directory with --root DIR)\n",
    );
  });
});

Deno.test("install.sh explains itself and rejects bad arguments", async () => {
  const help = await installSh(["--help"]);
  assertEquals(help.code, 0);
  assert(help.stdout.startsWith("usage: install.sh"), help.stdout);
  for (
    const args of [
      ["--purge"],
      ["--root"],
      ["--bogus"],
      ["--uninstall", "--binary", "/bin/true"],
      ["--package", "--binary", "/bin/true"],
      ["--admin-token", "--uninstall"],
      ["--admin-token", "--binary", "/bin/true"],
      ["--root", "/tmp", "--package", "--admin-token"],
    ]
  ) {
    const r = await installSh(args);
    assertEquals(r.code, 2, args.join(" "));
    assertEquals(r.stdout, "");
    assert(r.stderr.includes("try: install.sh --help"), r.stderr);
  }
});
