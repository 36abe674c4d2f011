/**
 * A full disk, for real: the node's checkpoint directories and state directory on a small tmpfs
 * that is filled to the last byte, then grown. After every pass: no temp file, no empty or torn
 * file anywhere (a file present has exactly the content it has once everything is written), each
 * failed write logged once with its path; the agent keeps going and catches up by itself. With
 * the disk completely full, an outage still activates every checkpoint (a hard link needs no
 * space) and the copies are withdrawn after.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { basename, join } from "node:path";
import type { PassError, PassReport } from "../../lib/pass/report.ts";
import { checksFor, runChecks } from "../../lib/verify/verify.ts";
import type { Config } from "../../lib/config/types.ts";
import { manifestFileName } from "../../lib/core/checkpoint_layout.ts";
import { podId } from "../../lib/core/pod.ts";
import { TEMP_MARKER } from "../../lib/disk/atomic_write.ts";
import { readManifestDir } from "../../lib/disk/manifests.ts";
import { type AgentOnNode, withAgentOnNode } from "../helpers/agent_on_node.ts";
import { runCli } from "../helpers/cli.ts";
import { type Tmpfs, TMPFS_UNAVAILABLE, withTmpfs } from "../helpers/tmpfs.ts";
import { tree } from "../helpers/tree.ts";

const PARENTS = [
  "kube-system/kube-apiserver-7x2kq",
  "kube-system/kube-controller-manager-m4t9z",
  "kube-system/kube-scheduler-q8w2c",
];
const KIB = 1024;
const BALLAST = ".ballast";
const ignore = TMPFS_UNAVAILABLE !== undefined;

/** Every directory the agent writes, on the tmpfs; the static-pod dir made as the kubelet does. */
async function dirsOn(fs: Tmpfs): Promise<Partial<Config>> {
  await Deno.mkdir(fs.path("manifests"), { mode: 0o755 });
  return {
    staticPodDir: fs.path("manifests"),
    inactiveDir: fs.path("inactive"),
    secretsDir: fs.path("secrets"),
    configmapsDir: fs.path("configmaps"),
    stateDir: fs.path("state"),
  };
}

function onTmpfs(size: number, fn: (n: AgentOnNode, fs: Tmpfs) => Promise<void>) {
  return withTmpfs(size, async (fs) => {
    await withAgentOnNode({}, await dirsOn(fs), (n) => fn(n, fs));
  });
}

/** Every file on the tmpfs but the ballast, by relative path, with its content. */
async function filesOn(fs: Tmpfs): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [path, entry] of Object.entries(await tree(fs.dir))) {
    if (entry.type === "file" && path !== BALLAST) out[path] = entry.content!;
  }
  return out;
}

/** Checkpoint files (not the state dir's records, which change with every state). */
function checkpointFiles(files: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(files).filter(([path]) => !path.startsWith("state/")));
}

/**
 * No temp file and no empty file; every manifest and record parses; and, given the files once
 * everything is written, every checkpoint file present already has its full content.
 */
function assertNothingTorn(files: Record<string, string>, complete?: Record<string, string>) {
  for (const [path, content] of Object.entries(files)) {
    assert(!basename(path).includes(TEMP_MARKER), `temp file left: ${path}`);
    assert(content.length > 0, `empty file: ${path}`);
    if (path.endsWith(".json")) JSON.parse(content);
  }
  if (!complete) return;
  for (const [path, content] of Object.entries(checkpointFiles(files))) {
    assertEquals(content, complete[path], `torn or stale: ${path}`);
  }
}

/** Each failed write says ENOSPC and names its path on the tmpfs, once in the pass's log. */
/**
 * Each failed write of a checkpoint says ENOSPC and names its path on the tmpfs, once in the
 * pass's log. (The state dir's records are judged by the status store's own tests.)
 */
function assertFailuresLogged(fs: Tmpfs, all: PassError[], allLogged: Record<string, unknown>[]) {
  const errors = all.filter(isCheckpointWrite);
  const logged = allLogged.filter(isCheckpointWrite);
  assert(errors.length > 0);
  for (const e of errors) {
    assert(e.message.startsWith("No space left on device"), e.message);
    assert(e.message.includes(`'${fs.dir}/`), `no path in: ${e.message}`);
  }
  assertEquals(logged.map((l) => l.message).sort(), errors.map((e) => e.message).sort());
  assertEquals(new Set(errors.map((e) => e.message)).size, errors.length);
}

/** An error or log line of a write of checkpoint files (not of the state dir's records). */
function isCheckpointWrite(e: { op?: unknown }): boolean {
  return ["checkpoint", "start", "stop", "remove"].includes(String(e.op));
}

/** One pass, with the "write failed" lines it logged at error (debug: the same again). */
async function passLogged(n: AgentOnNode) {
  const from = n.log.lines.length;
  const report = await n.pass();
  const lines = n.log.lines.slice(from).filter((l) => l.msg === "write failed");
  return {
    report,
    logged: lines.filter((l) => l.level === "error"),
    again: lines.filter((l) => l.level === "debug"),
  };
}

/** A pass that wrote everything: complete, and `verify` finds nothing wrong. */
async function assertRecovered(n: AgentOnNode, report: PassReport) {
  assertEquals([report.errors, report.complete], [[], true]);
  const c = n.config();
  assertEquals((await runChecks(c.stateDir, checksFor(c))).findings, []);
  assertEquals(
    (await readManifestDir(c.inactiveDir)).manifests.map((m) => podId(m.pod)).sort(),
    PARENTS,
  );
}

/** Frees `bytes` of the ballast (whole pages), as a disk that some other user drains. */
async function freeSome(ballast: string, bytes: number) {
  const { size } = await Deno.stat(ballast);
  await Deno.truncate(ballast, Math.max(0, size - bytes));
}

Deno.test(
  "full disk: failed writes leave nothing torn, are said once at error (at debug while they last) and tried again every pass; a grown disk recovers",
  {
    ignore,
  },
  async () => {
    await onTmpfs(256 * KIB, async (n, fs) => {
      const ballast = await fs.fill(BALLAST);
      assertEquals(await fs.freeBytes(), 0);
      const seen: Record<string, string>[] = [];
      for (let i = 0; i < 3; i++) {
        const { report, logged, again } = await passLogged(n);
        assertEquals(report.complete, false);
        // Said at error by the first pass that fails them, at debug by the passes after.
        assertFailuresLogged(fs, report.errors, i === 0 ? logged : again);
        if (i > 0) assertEquals(logged.filter((l) => isCheckpointWrite({ op: l.op })), []);
        seen.push(await filesOn(fs));
        assertNothingTorn(seen.at(-1)!);
      }
      // The same writes fail on every pass: they are tried again, not remembered as done.
      const failed = await passLogged(n);
      assertEquals(failed.report.errors.length, (await passLogged(n)).report.errors.length);

      // A disk that drains a few pages at a time: each pass gets further, nothing torn meanwhile.
      for (let i = 0; i < 6; i++) {
        await freeSome(ballast, 12 * KIB);
        await n.pass();
        seen.push(await filesOn(fs));
      }
      await fs.resize(1024 * KIB);
      await assertRecovered(n, await n.pass());
      // Each write that failed is said to succeed again, once.
      assert(n.log.find("write succeeds again").length > 0, "no end of the failures said");
      const complete = await filesOn(fs);
      for (const files of seen) assertNothingTorn(files, complete);
      assert(Object.keys(checkpointFiles(seen.at(-1)!)).length > 0, "no progress while draining");
    });
  },
);

Deno.test(
  "full disk: a tmpfs too small for even the first checkpoint; nothing torn, recovers once grown",
  {
    ignore,
  },
  async () => {
    await onTmpfs(4 * KIB, async (n, fs) => {
      const seen: Record<string, string>[] = [];
      for (let i = 0; i < 3; i++) {
        const { report, logged, again } = await passLogged(n);
        assertFailuresLogged(fs, report.errors, i === 0 ? logged : again);
        seen.push(await filesOn(fs));
        assertNothingTorn(seen.at(-1)!);
      }
      await fs.resize(1024 * KIB);
      await assertRecovered(n, await n.pass());
      const complete = await filesOn(fs);
      for (const files of seen) assertNothingTorn(files, complete);
    });
  },
);

Deno.test(
  "full disk: completely full, an outage activates every checkpoint by hard link, and the copies go after",
  {
    ignore,
  },
  async () => {
    await onTmpfs(256 * KIB, async (n, fs) => {
      await assertRecovered(n, await n.pass());
      const ballast = await fs.fill(BALLAST);
      assertEquals(await fs.freeBytes(), 0);
      const c = n.config();

      await n.node.loseControlPlane();
      const down = await n.pass();
      assertEquals(down.plan.starts, PARENTS);
      assertEquals(down.errors.filter(isCheckpointWrite), []);
      assertEquals(await fs.freeBytes(), 0);
      // What the kubelet reads: every checkpoint, whole, each the inactive manifest's own file.
      const kubelet = await readManifestDir(c.staticPodDir);
      assertEquals([kubelet.problems, kubelet.pods.map(podId).sort()], [[], PARENTS]);
      for (const m of kubelet.manifests) {
        const active = await Deno.stat(m.file);
        const inactive = await Deno.stat(join(c.inactiveDir, basename(m.file)));
        assertEquals([active.ino, active.nlink], [inactive.ino, 2]);
      }
      assertNothingTorn(await filesOn(fs));
      // Still full on the next passes: the copies stay, nothing is written again.
      for (let i = 0; i < 3; i++) {
        const again = await n.pass();
        assertEquals(again.applied.filter((a) => a.op === "start"), []);
        assertEquals(again.errors.filter(isCheckpointWrite), []);
      }

      await n.node.restoreControlPlane();
      const back = await n.pass();
      // Judged by what was done, not by the plan: with the status records unwritable, the store
      // may not know the copies were started.
      assertEquals(back.applied.filter((a) => a.op === "stop").map((a) => a.id), PARENTS);
      assertEquals(back.errors.filter(isCheckpointWrite), []);
      assertEquals((await readManifestDir(c.staticPodDir)).pods, []);
      assertNothingTorn(await filesOn(fs));

      await Deno.remove(ballast);
      await assertRecovered(n, await n.pass());
    });
  },
);

Deno.test("full disk: the daemon's loop keeps going and recovers by itself once there is space", {
  ignore,
}, async () => {
  await withTmpfs(256 * KIB, async (fs) => {
    const dirs = { ...await dirsOn(fs), pollIntervalMs: 1 };
    await withAgentOnNode({}, dirs, async (n) => {
      await fs.fill(BALLAST);
      const daemon = await n.daemon();
      const reports: PassReport[] = [];
      const stop = new AbortController();
      let grown: Promise<void> | undefined;
      daemon.onPass((report) => {
        reports.push(report);
        // Three passes on a full disk, then space comes back while the loop runs on.
        if (reports.length === 3) grown = fs.resize(1024 * KIB);
        if (report.complete || reports.length >= 200) stop.abort();
      });
      await daemon.loop(stop.signal);
      await grown;
      assertNothingTorn(await filesOn(fs));
      const last = reports.at(-1)!;
      assert(last.complete, `no complete pass in ${reports.length}`);
      for (const report of reports.slice(0, 3)) {
        assertEquals(report.complete, false);
        const errors = report.errors.filter(isCheckpointWrite);
        assert(errors.length > 0);
        assert(errors.every((e) => e.message.startsWith("No space left on device")));
      }
      await assertRecovered(n, await n.pass());
    });
  });
});

Deno.test(
  "full disk: ckpt-agent --once fails cleanly on a full disk, recovers, and activates on a completely full one",
  {
    ignore,
  },
  async () => {
    await withTmpfs(256 * KIB, async (fs) => {
      const dirs = await dirsOn(fs);
      await withAgentOnNode({}, dirs, async (n) => {
        const configFile = await n.node.writeConfigFile(dirs);
        const once = async () => {
          const r = await runCli(["--once", "--config", configFile, "--output", "json"]);
          assert(r.stdout.trim() !== "", `no report; exit ${r.code}; stderr: ${r.stderr}`);
          const logged = r.stderr.split("\n").filter((l) => l.includes('"write failed"'))
            .map((l) => JSON.parse(l));
          return { code: r.code, report: JSON.parse(r.stdout) as PassReport, logged };
        };
        const ballast = await fs.fill(BALLAST);
        const seen: Record<string, string>[] = [];
        for (let i = 0; i < 2; i++) {
          const full = await once();
          assertEquals(full.code, 1);
          assertFailuresLogged(fs, full.report.errors, full.logged);
          seen.push(await filesOn(fs));
          assertNothingTorn(seen.at(-1)!);
        }
        await Deno.remove(ballast);
        const recovered = await once();
        assertEquals([recovered.code, recovered.report.errors], [0, []]);
        const complete = await filesOn(fs);
        for (const files of seen) assertNothingTorn(files, complete);

        await fs.fill(BALLAST);
        await n.node.loseControlPlane();
        const down = await once();
        assertEquals(down.report.plan.starts, PARENTS);
        assertEquals(down.report.errors.filter(isCheckpointWrite), []);
        const kubelet = await readManifestDir(n.config().staticPodDir);
        assertEquals([kubelet.problems, kubelet.pods.map(podId).sort()], [[], PARENTS]);
        const after = await filesOn(fs);
        assertNothingTorn(after);
        for (const [path, content] of Object.entries(checkpointFiles(after))) {
          const source = path.replace(/^manifests\//, "inactive/");
          assertEquals(content, complete[source], path);
        }
      });
    });
  },
);

Deno.test({
  name:
    "the static-pod dir and the inactive dir on separate mounts: activation copies, and says once that a full disk would stop it",
  ignore,
  fn: () =>
    withTmpfs(512 * KIB, async (fs) => {
      const dirs = await dirsOn(fs);
      // A bind mount of the inactive dir on itself, as a unit's own ReadWritePaths= entry for it
      // makes: one file system, two mounts.
      await Deno.mkdir(dirs.inactiveDir!);
      await bindOnItself(dirs.inactiveDir!);
      try {
        await withAgentOnNode({}, dirs, async (n) => {
          const warning = "the static-pod dir and the inactive dir are on separate mounts";
          await n.pass();
          await n.node.loseControlPlane();
          const down = await n.pass();
          assertEquals([down.plan.starts, down.errors], [PARENTS, []]);
          for (const id of PARENTS) {
            const file = manifestFileName(id);
            const [active, inactive] = await Promise.all([
              Deno.stat(join(dirs.staticPodDir!, file)),
              Deno.stat(join(dirs.inactiveDir!, file)),
            ]);
            // Copied, not linked: link(2) refuses to cross the mounts.
            assert(active.ino !== inactive.ino, id);
          }
          const said = n.log.lines.filter((l) => String(l.msg).startsWith(warning));
          assertEquals(said.map((l) => [l.level, l.inactiveDir]), [["warn", dirs.inactiveDir]]);
        });
      } finally {
        await unmount(dirs.inactiveDir!);
      }
    }),
});

async function bindOnItself(dir: string) {
  const out = await new Deno.Command("mount", { args: ["--bind", dir, dir] }).output();
  assert(out.success, new TextDecoder().decode(out.stderr));
}

async function unmount(dir: string) {
  const out = await new Deno.Command("umount", { args: [dir] }).output();
  assert(out.success, new TextDecoder().decode(out.stderr));
}
