/** Read-only mounts from mountinfo: the parser on real lines, and real tmpfs mounts remounted ro. */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { join } from "node:path";
import { mountOf, parseMountInfo, readOnlyDirs, resolvedPath } from "../../lib/disk/mounts.ts";
import { withTempDir } from "../helpers/temp_dir.ts";
import { AGENT_PERMISSIONS } from "../../scripts/permissions.ts";
import { TMPFS_UNAVAILABLE, withTmpfs } from "../helpers/tmpfs.ts";

// Lines as a systemd unit with ProtectSystem=strict and ReadWritePaths= sees them.
const MOUNTINFO = [
  "23 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw",
  "40 23 8:1 /etc /etc ro,relatime shared:1 - ext4 /dev/sda1 rw",
  "41 40 8:1 /etc/kubernetes/manifests /etc/kubernetes/manifests rw,relatime shared:1 - ext4 /dev/sda1 rw",
  "42 23 0:25 / /run rw,nosuid,nodev shared:5 - tmpfs tmpfs rw,mode=755",
  "43 42 0:26 / /run/lock rw - tmpfs tmpfs ro",
  "44 23 0:27 / /srv/my\\040dir rw - tmpfs tmpfs rw",
  "45 44 0:28 / /srv/my\\040dir ro - tmpfs tmpfs rw",
  "",
].join("\n");

Deno.test("mountinfo: per-mount and super-block ro, escaped names, the deepest and last mount wins", () => {
  const mounts = parseMountInfo(MOUNTINFO);
  assertEquals(mounts.map((m) => [m.path, m.readOnly]), [
    ["/", false],
    ["/etc", true],
    ["/etc/kubernetes/manifests", false],
    ["/run", false],
    ["/run/lock", true],
    ["/srv/my dir", false],
    ["/srv/my dir", true],
  ]);
  const cases: [string, string][] = [
    ["/etc/kubernetes/manifests", "/etc/kubernetes/manifests"],
    ["/etc/kubernetes/manifests/x.json", "/etc/kubernetes/manifests"],
    ["/etc/kubernetes/manifests-old", "/etc"],
    ["/etc/kubernetes/inactive-manifests", "/etc"],
    ["/run/lock/ckpt-agent.lock", "/run/lock"],
    ["/runner", "/"],
    ["/srv/my dir/state", "/srv/my dir"],
  ];
  for (const [path, mountPoint] of cases) assertEquals(mountOf(mounts, path)?.path, mountPoint);
  assertEquals(mountOf(mounts, "/srv/my dir/state")?.readOnly, true);
});

Deno.test({
  name: "a tmpfs remounted read-only is seen, for its directories and for missing ones below it",
  ignore: TMPFS_UNAVAILABLE !== undefined,
  fn: () =>
    withTmpfs(64 * 1024, async (fs) => {
      await Deno.mkdir(fs.path("manifests"));
      const dirs = [fs.path("manifests"), fs.path("not/yet/made")];
      assertEquals(readOnlyDirs(dirs), new Map());
      await fs.readOnly(true);
      const refused = (at: string) => `on a read-only file system (${at} refuses writes: EROFS)`;
      assertEquals(
        readOnlyDirs(dirs),
        new Map([[dirs[0], refused(dirs[0])], [dirs[1], refused(fs.dir)]]),
      );
      await fs.readOnly(false);
      assertEquals(readOnlyDirs(dirs), new Map());
    }),
});

Deno.test("resolvedPath resolves symlinks, a missing path's through its nearest existing ancestor", async () => {
  await withTempDir(async (dir) => {
    const real = Deno.realPathSync(dir);
    await Deno.mkdir(join(dir, "srv/manifests"), { recursive: true });
    await Deno.symlink(join(dir, "srv"), join(dir, "link"));
    assertEquals(resolvedPath(join(dir, "link/manifests")), join(real, "srv/manifests"));
    assertEquals(resolvedPath(join(dir, "link/not/yet")), join(real, "srv/not/yet"));
    assertEquals(resolvedPath("/"), "/");
  });
});

const PROBE = new URL("../helpers/mount_probe.ts", import.meta.url).pathname;

/** readOnlyDirs and separateMounts in a process with the compiled binary's permissions only. */
async function probeAsTheBinary(readOnly: string[], separate: [string, string]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      ...AGENT_PERMISSIONS.map((p) => p.flag),
      PROBE,
      JSON.stringify({ readOnly, separate }),
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assertEquals(out.code, 0, new TextDecoder().decode(out.stderr));
  return JSON.parse(new TextDecoder().decode(out.stdout));
}

Deno.test({
  name:
    "with the binary's permissions (no /proc), read-only dirs and separate mounts are still seen",
  ignore: TMPFS_UNAVAILABLE !== undefined,
  fn: () =>
    withTmpfs(64 * 1024, async (fs) => {
      const [manifests, inactive] = [fs.path("manifests"), fs.path("inactive")];
      await Deno.mkdir(manifests);
      await Deno.mkdir(inactive);
      assertEquals(await probeAsTheBinary([manifests], [manifests, inactive]), {
        readOnly: {},
        separate: null,
      });
      // The inactive dir on a mount of its own, as a unit's own ReadWritePaths= entry makes it.
      await mountCommand("--bind", inactive, inactive);
      try {
        assertEquals(
          (await probeAsTheBinary([], [manifests, inactive])).separate,
          [manifests, inactive],
        );
      } finally {
        await mountCommand("-l", inactive);
      }
      await fs.readOnly(true);
      assertEquals((await probeAsTheBinary([manifests], [manifests, inactive])).readOnly, {
        [manifests]: `on a read-only file system (${manifests} refuses writes: EROFS)`,
      });
      // Nothing was created, changed or stamped by asking.
      await fs.readOnly(false);
      assertEquals([...Deno.readDirSync(manifests)], []);
    }),
});

async function mountCommand(...args: string[]) {
  const command = args[0] === "-l" ? "umount" : "mount";
  const out = await new Deno.Command(command, { args }).output();
  assertEquals(out.code, 0, new TextDecoder().decode(out.stderr));
}
