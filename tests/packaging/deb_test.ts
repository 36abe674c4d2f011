/**
 * `deno task deb` (scripts/deb.ts), built as the task builds it: the binary compiled from this
 * tree with the deno executable standing in for denort (as in compile_test.ts), then packaged.
 * The package is inspected with dpkg-deb, checked by lintian, and installed into scratch roots
 * with `dpkg --root --force-script-chrootless`: dpkg runs the maintainer scripts on this machine
 * with DPKG_ROOT set to the scratch root, the way image builders install packages. There they
 * enable the unit in the scratch root, make the admin token once, must not talk to this
 * machine's systemd, keep an edited configuration and the token through an upgrade, keep the
 * checkpoints on remove, and purge as install.sh does.
 *
 * The package is compressed with xz at level 1 (DPKG_DEB_COMPRESSOR_LEVEL, read by dpkg-deb
 * itself) rather than the default 6, which takes four times as long on the 110 MB binary; the
 * format and the contents are the same.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { Buffer } from "node:buffer";
import { defaultConfig } from "../../lib/config/load.ts";
import { gitCommit } from "../../lib/git_commit.ts";
import { debFileName, packageVersion } from "../../scripts/deb.ts";
import { withTempDir } from "../helpers/temp_dir.ts";
import {
  ALERT_RULES,
  CONFIG_FILE,
  type Listing,
  listTree,
  REPO,
  run,
  type RunResult,
  sha256File,
  UNIT_FILE,
} from "./tools.ts";

const UNIT = "ckpt-agent.service";
const WANTS_LINK = `etc/systemd/system/multi-user.target.wants/${UNIT}`;
const ACTIVE_CHECKPOINT = "etc/kubernetes/manifests/kube-system-kube-apiserver.json";
const FOREIGN_MANIFEST = "etc/kubernetes/manifests/etcd.yaml";
/** Where the agent and the verbs look for the token by default: where the installs make it. */
const ADMIN_TOKEN = defaultConfig("cp-1").adminTokenFile.slice(1);
/** What talks to systemd from maintainer scripts; the tests log every call of them. */
const SYSTEMD_TOOLS = ["systemctl", "deb-systemd-helper", "deb-systemd-invoke"];
const SYSTEM_PATH = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"];

function ok(r: RunResult, what: string) {
  assertEquals(r.code, 0, `${what}:\n${r.stdout}${r.stderr}`);
  return r;
}

async function buildPackage(dir: string): Promise<string> {
  const r = await run(Deno.execPath(), [
    "run",
    "--allow-all",
    `${REPO}/scripts/deb.ts`,
    "--output-dir",
    `${dir}/out`,
  ], { cwd: REPO, env: { DENORT_BIN: Deno.execPath(), DPKG_DEB_COMPRESSOR_LEVEL: "1" } });
  ok(r, "deno task deb");
  const arch = (await run("dpkg", ["--print-architecture"])).stdout.trim();
  const deb = `${dir}/out/${debFileName(await packageVersion(), arch)}`;
  assertEquals(r.stdout.trimEnd().split("\n").at(-1), `deb: built ${deb}`);
  return deb;
}

/** The first program of that name on the system's PATH. */
async function systemProgram(name: string): Promise<string | undefined> {
  for (const dir of SYSTEM_PATH) {
    const info = await Deno.stat(`${dir}/${name}`).catch(() => undefined);
    if (info?.isFile && (info.mode! & 0o111) !== 0) return `${dir}/${name}`;
  }
}

/** One call of a systemd tool by a maintainer script: the tool, DPKG_ROOT and the arguments. */
interface Call {
  program: string;
  dpkgRoot: string;
  args: string;
}

/**
 * A scratch root with an empty dpkg database, and a PATH on which each systemd tool present is a
 * wrapper that logs the call and runs the real tool. With `withoutHelpers`, deb-systemd-helper
 * and deb-systemd-invoke are not on that PATH at all (a system without init-system-helpers).
 */
class ScratchRoot {
  private constructor(
    readonly root: string,
    private readonly log: string,
    private readonly path: string,
  ) {}

  static async create(dir: string, opts: { withoutHelpers: boolean }): Promise<ScratchRoot> {
    const root = `${dir}/root`;
    await Deno.mkdir(`${root}/var/lib/dpkg/info`, { recursive: true });
    await Deno.mkdir(`${root}/var/lib/dpkg/updates`);
    await Deno.writeTextFile(`${root}/var/lib/dpkg/status`, "");
    const log = `${dir}/calls.log`;
    await Deno.writeTextFile(log, "");
    const spies = `${dir}/spies`;
    await Deno.mkdir(spies);
    const hidden = new Set(opts.withoutHelpers ? ["deb-systemd-helper", "deb-systemd-invoke"] : []);
    const path = [spies];
    for (const name of SYSTEMD_TOOLS) {
      const real = await systemProgram(name);
      if (real === undefined || hidden.has(name)) continue;
      await Deno.writeTextFile(
        `${spies}/${name}`,
        `#!/bin/sh\nprintf '%s\\t%s\\t%s\\n' ${name} "\${DPKG_ROOT-unset}" "$*" >>'${log}'\n` +
          `exec '${real}' "$@"\n`,
      );
      await Deno.chmod(`${spies}/${name}`, 0o755);
    }
    if (hidden.size === 0) {
      path.push(...SYSTEM_PATH);
    } else {
      // Everything else the system has, as links in one directory.
      const links = `${dir}/bin`;
      await Deno.mkdir(links);
      for (const sysDir of SYSTEM_PATH) {
        const entries = await Array.fromAsync(Deno.readDir(sysDir)).catch(() => []);
        for (const entry of entries) {
          if (hidden.has(entry.name) || SYSTEMD_TOOLS.includes(entry.name)) continue;
          await Deno.symlink(`${sysDir}/${entry.name}`, `${links}/${entry.name}`).catch(() => {});
        }
      }
      path.push(links);
    }
    return new ScratchRoot(root, log, path.join(":"));
  }

  /**
   * The scratch root's package database knows none of this machine's packages, so the package's
   * dependencies (the C library) are not installed there: --force-depends.
   */
  dpkg(...args: string[]): Promise<RunResult> {
    return run("dpkg", [
      `--root=${this.root}`,
      "--force-script-chrootless",
      "--force-depends",
      ...args,
    ], { env: { PATH: this.path } });
  }

  async status(): Promise<string> {
    const r = await this.dpkg("--status", "ckpt-agent");
    return r.code === 0 ? /^Status: (.*)$/m.exec(r.stdout)![1] : "not installed";
  }

  /** The systemd tools' calls since the last time, emptying the log. */
  async calls(): Promise<Call[]> {
    const text = await Deno.readTextFile(this.log);
    await Deno.writeTextFile(this.log, "");
    return text.split("\n").filter((line) => line !== "").map((line) => {
      const [program, dpkgRoot, args] = line.split("\t");
      return { program, dpkgRoot, args };
    });
  }

  /** The scratch root, without dpkg's own database. */
  async tree(): Promise<Listing> {
    return Object.fromEntries(
      Object.entries(await listTree(this.root)).filter(([path]) =>
        !path.startsWith("var/lib/dpkg")
      ),
    );
  }

  async write(files: Record<string, string>) {
    for (const [path, text] of Object.entries(files)) {
      await Deno.mkdir(`${this.root}/${path.slice(0, path.lastIndexOf("/"))}`, {
        recursive: true,
      });
      await Deno.writeTextFile(`${this.root}/${path}`, text);
    }
  }
}

/** Whether nothing in the calls could have reached this machine's systemd. */
function touchesOnly(calls: Call[], root: string) {
  for (const call of calls) {
    assert(call.program !== "deb-systemd-invoke", `started or stopped something: ${call.args}`);
    if (call.program === "systemctl") {
      assert(call.args.split(" ").includes(`--root=${root}`), `systemctl ${call.args}`);
    } else {
      assertEquals(call.dpkgRoot, root, `${call.program} ${call.args}`);
    }
  }
}

function pathsOf(listing: Listing, kind: "file" | "dir") {
  return Object.keys(listing).filter((path) => listing[path].startsWith(`${kind} `));
}

Deno.test("deno task deb builds a package that installs, upgrades, removes and purges like install.sh", async (t) => {
  await withTempDir(async (dir) => {
    const deb = await buildPackage(dir);
    // lintian takes about half a minute on the binary: it runs while dpkg is tested.
    const lintian = run("lintian", ["--display-info", "--show-overrides", deb]);
    try {
      await checkPackage(t, dir, deb, lintian);
    } finally {
      await lintian;
    }
  });
});

async function checkPackage(
  t: Deno.TestContext,
  dir: string,
  deb: string,
  lintian: Promise<RunResult>,
) {
  const data = `${dir}/data`;
  ok(await run("dpkg-deb", ["--extract", deb, data]), "dpkg-deb --extract");
  const packaged = await listTree(data);

  await t.step(
    "dpkg-deb --info: the control fields, conffiles and maintainer scripts",
    async () => {
      const field = async (name: string) =>
        ok(await run("dpkg-deb", ["--field", deb, name]), name).stdout.trim();
      assertEquals(await field("Package"), "ckpt-agent");
      assertEquals(await field("Version"), await packageVersion());
      assertEquals(
        await field("Architecture"),
        (await run("dpkg", ["--print-architecture"])).stdout.trim(),
      );
      assertEquals(await field("Section"), "admin");
      assert(/^libc6 \(>= [\d.]+\)/.test(await field("Depends")), await field("Depends"));
      assert(/^\d+$/.test(await field("Installed-Size")));
      const control = `${dir}/control`;
      ok(await run("dpkg-deb", ["--control", deb, control]), "dpkg-deb --control");
      assertEquals(
        await Deno.readTextFile(`${control}/conffiles`),
        "/etc/ckpt-agent/config.yaml\n",
      );
      for (const script of ["postinst", "prerm", "postrm"]) {
        assertEquals((await Deno.stat(`${control}/${script}`)).mode! & 0o777, 0o755, script);
      }
      // postrm carries install.sh, which does the purge; postinst too, which makes the token.
      for (const script of ["postinst", "postrm"]) {
        const text = await Deno.readTextFile(`${control}/${script}`);
        assert(text.includes(await Deno.readTextFile(`${REPO}/install.sh`)), script);
      }
      const info = ok(await run("dpkg-deb", ["--info", deb]), "dpkg-deb --info").stdout;
      for (const file of ["conffiles", "control", "md5sums", "postinst", "postrm", "prerm"]) {
        assert(new RegExp(`\\s${file}\\s`).test(info), `${file} in:\n${info}`);
      }
    },
  );

  await t.step("dpkg-deb --contents: every file, its mode, owned by root", async () => {
    const contents = ok(await run("dpkg-deb", ["--contents", deb]), "--contents").stdout;
    const entries = contents.trimEnd().split("\n").map((line) => line.split(/\s+/));
    for (const [, owner, , , , path] of entries) assertEquals(owner, "root/root", path);
    const files = Object.fromEntries(
      entries.filter(([mode]) => mode.startsWith("-")).map(([mode, , , , , path]) => [
        path,
        mode,
      ]),
    );
    assertEquals(files, {
      "./etc/ckpt-agent/config.yaml": "-rw-r--r--",
      "./usr/bin/ckpt-agent": "-rwxr-xr-x",
      "./usr/lib/systemd/system/ckpt-agent.service": "-rw-r--r--",
      "./usr/share/ckpt-agent/prometheus/ckpt-agent.rules.yml": "-rw-r--r--",
      "./usr/share/doc/ckpt-agent/README.md.gz": "-rw-r--r--",
      "./usr/share/doc/ckpt-agent/changelog.gz": "-rw-r--r--",
      "./usr/share/doc/ckpt-agent/copyright": "-rw-r--r--",
      "./usr/share/lintian/overrides/ckpt-agent": "-rw-r--r--",
      "./usr/share/man/man8/ckpt-agent.8.gz": "-rw-r--r--",
    });
    const dirs = Object.fromEntries(
      entries.filter(([mode]) => mode.startsWith("d")).map(([mode, , , , , path]) => [
        path,
        mode,
      ]),
    );
    for (
      const path of [
        "./etc/kubernetes/inactive-manifests/",
        "./etc/kubernetes/checkpoint-secrets/",
        "./etc/kubernetes/checkpoint-configmaps/",
        "./var/lib/ckpt-agent/",
      ]
    ) {
      assertEquals(dirs[path], "drwx------", path);
    }
    // The kubelet's directory is not the package's: dpkg must never remove it.
    assertEquals(dirs["./etc/kubernetes/manifests/"], undefined);
    for (const [path, mode] of Object.entries(dirs)) {
      assert(mode === "drwxr-xr-x" || mode === "drwx------", `${path} ${mode}`);
    }

    // The files are the repository's, the unit running the binary where the package puts it.
    assertEquals(
      await Deno.readTextFile(`${data}/usr/lib/systemd/system/ckpt-agent.service`),
      (await Deno.readTextFile(UNIT_FILE)).replace(
        "\nExecStart=/usr/local/bin/ckpt-agent ",
        "\nExecStart=/usr/bin/ckpt-agent ",
      ),
    );
    assertEquals(
      packaged["etc/ckpt-agent/config.yaml"],
      `file 0644 ${await sha256File(CONFIG_FILE)}`,
    );
    assertEquals(
      packaged["usr/share/ckpt-agent/prometheus/ckpt-agent.rules.yml"],
      `file 0644 ${await sha256File(ALERT_RULES)}`,
    );
    // The binary was compiled from this tree by the task.
    const binary = Buffer.from(await Deno.readFile(`${data}/usr/bin/ckpt-agent`));
    const stamp = `export const BUILD_COMMIT: string | undefined = "${await gitCommit(REPO)}";`;
    assert(binary.includes(stamp), "the commit stamped into the packaged binary");
  });

  await t.step("install, upgrade over itself, remove, purge: with deb-systemd-helper", async () => {
    await withTempDir(async (scratch) => {
      const s = await ScratchRoot.create(scratch, { withoutHelpers: false });
      ok(await s.dpkg("--install", deb), "install");
      assertEquals(await s.status(), "install ok installed");
      ok(await s.dpkg("--verify", "ckpt-agent"), "verify");
      const installed = await s.tree();
      // Everything the package holds, where it holds it, and the unit enabled in the root.
      for (const path of [...pathsOf(packaged, "file"), ...pathsOf(packaged, "dir")]) {
        assertEquals(installed[path], packaged[path], path);
      }
      // The admin token, made by postinst for this root alone: random, 0600, root's.
      const tokenPath = `${s.root}/${ADMIN_TOKEN}`;
      const token = await Deno.readTextFile(tokenPath);
      assert(/^[0-9a-f]{64}\n$/.test(token), token);
      const tokenInfo = await Deno.lstat(tokenPath);
      assertEquals([tokenInfo.mode! & 0o7777, tokenInfo.uid, tokenInfo.gid], [0o600, 0, 0]);
      assertEquals(installed[WANTS_LINK], `link -> /usr/lib/systemd/system/${UNIT}`);
      const calls = await s.calls();
      touchesOnly(calls, s.root);
      assert(calls.some((c) => c.program === "deb-systemd-helper" && c.args === `enable ${UNIT}`));

      // An upgrade over itself keeps the operator's configuration.
      const config = `${s.root}/etc/ckpt-agent/config.yaml`;
      const edited = `${await Deno.readTextFile(config)}pollInterval: 10s\n`;
      await Deno.writeTextFile(config, edited);
      const upgrade = ok(await s.dpkg("--install", deb), "upgrade");
      assert(upgrade.stdout.includes("Unpacking ckpt-agent"), upgrade.stdout);
      assertEquals(await Deno.readTextFile(config), edited);
      assertEquals(await s.status(), "install ok installed");
      assertEquals(await Deno.readTextFile(tokenPath), token);
      touchesOnly(await s.calls(), s.root);

      // Remove: the package's files go; the configuration, the state and the checkpoints stay.
      await s.write({
        [ACTIVE_CHECKPOINT]:
          '{"metadata":{"annotations":{"checkpointer.alpha.coreos.com/checkpoint-of":"kube-apiserver"}}}',
        [FOREIGN_MANIFEST]: "apiVersion: v1\nkind: Pod\n",
        "etc/kubernetes/inactive-manifests/kube-system-kube-apiserver.json": "{}",
        "etc/kubernetes/checkpoint-secrets/kube-system/kube-apiserver/tls/key": "secret",
        "var/lib/ckpt-agent/status/kube-system_kube-apiserver.json": "{}",
      });
      const beforeRemove = await s.tree();
      const removed = ok(await s.dpkg("--remove", "ckpt-agent"), "remove");
      assertEquals(await s.status(), "deinstall ok config-files");
      assert(removed.stderr.includes(`${s.root}/${ACTIVE_CHECKPOINT}`), removed.stderr);
      const afterRemove = await s.tree();
      for (const path of pathsOf(packaged, "file").filter((p) => !p.startsWith("etc/"))) {
        assertEquals(afterRemove[path], undefined, path);
      }
      for (const [path, kind] of Object.entries(beforeRemove)) {
        if (path.startsWith("etc/") || path.startsWith("var/lib/ckpt-agent/")) {
          if (!kind.startsWith("dir ")) assertEquals(afterRemove[path], kind, path);
        }
      }
      assertEquals(await Deno.readTextFile(config), edited);
      assertEquals(await Deno.readTextFile(tokenPath), token);
      touchesOnly(await s.calls(), s.root);

      // Purge is refused while the kubelet may run a checkpoint: it stays, with its secrets
      // and the state; dpkg keeps the package as config-files, to be purged again.
      const refused = await s.dpkg("--purge", "ckpt-agent");
      assert(refused.code !== 0);
      assert(refused.stderr.includes("refusing to purge"), refused.stderr);
      assertEquals(await s.status(), "purge ok config-files");
      const afterRefusal = await s.tree();
      for (const [path, kind] of Object.entries(afterRemove)) {
        // dpkg itself removed the configuration file before postrm refused.
        if (path === "etc/ckpt-agent/config.yaml") continue;
        assertEquals(afterRefusal[path], kind, path);
      }

      // Once the checkpoint is gone, purge removes the configuration, the state, the
      // checkpoints and the unit's links; the kubelet's directory and manifests stay.
      await Deno.remove(`${s.root}/${ACTIVE_CHECKPOINT}`);
      ok(await s.dpkg("--purge", "ckpt-agent"), "purge");
      assertEquals(await s.status(), "not installed");
      const purged = await s.tree();
      for (
        const path of [
          ADMIN_TOKEN,
          "etc/ckpt-agent",
          "var/lib/ckpt-agent",
          "etc/kubernetes/inactive-manifests",
          "etc/kubernetes/checkpoint-secrets",
          WANTS_LINK,
        ]
      ) {
        assertEquals(purged[path], undefined, path);
      }
      assertEquals(purged["etc/kubernetes/manifests"], "dir 0755");
      assert(FOREIGN_MANIFEST in purged);
      touchesOnly(await s.calls(), s.root);
    });
  });

  await t.step(
    "install and remove without deb-systemd-helper: systemctl on the root only",
    async () => {
      await withTempDir(async (scratch) => {
        const s = await ScratchRoot.create(scratch, { withoutHelpers: true });
        ok(await s.dpkg("--install", deb), "install");
        assertEquals((await s.tree())[WANTS_LINK], `link -> /usr/lib/systemd/system/${UNIT}`);
        assertEquals(await s.calls(), [
          { program: "systemctl", dpkgRoot: s.root, args: `--root=${s.root} enable ${UNIT}` },
        ]);
        ok(await s.dpkg("--remove", "ckpt-agent"), "remove");
        assertEquals((await s.tree())[WANTS_LINK], undefined);
        assertEquals(await s.calls(), [
          { program: "systemctl", dpkgRoot: s.root, args: `--root=${s.root} disable ${UNIT}` },
        ]);
      });
    },
  );

  await t.step("lintian: no error or warning, every override used", async () => {
    const r = await lintian;
    const tags = r.stdout.split("\n").filter((line) => /^[A-Z]: /.test(line));
    assertEquals(tags.filter((line) => /^[EW]: /.test(line)), [], r.stdout + r.stderr);
    assert(tags.some((line) => line.startsWith("O: ")), r.stdout);
    assertEquals(tags.filter((line) => /unused-override|mismatched-override/.test(line)), []);
    // The exit status counts the overridden tags too, when they are shown: only the output says.
    assertEquals(
      r.stderr.split("\n").filter((line) => line !== "" && !line.includes("root privileges")),
      [],
    );
  });
}
