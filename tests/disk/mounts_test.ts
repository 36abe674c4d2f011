/** Read-only mounts from mountinfo: the parser on real lines, and real tmpfs mounts remounted ro. */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { join } from "node:path";
import { mountOf, parseMountInfo, readOnlyDirs, resolvedPath } from "../../lib/disk/mounts.ts";
import { withTempDir } from "../helpers/temp_dir.ts";
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
      const found = `on a read-only mount (${fs.dir})`;
      assertEquals(readOnlyDirs(dirs), new Map(dirs.map((dir) => [dir, found])));
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
