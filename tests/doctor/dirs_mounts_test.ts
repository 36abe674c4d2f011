/**
 * The configured directories' mounts, on real tmpfs mounts: read-only ones, the static-pod dir
 * and the inactive dir on two mounts, and a file system without room.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { directoryFindings, ROOM_FLOOR_BYTES } from "../../lib/doctor/dirs.ts";
import { TMPFS_UNAVAILABLE, withTmpfs } from "../helpers/tmpfs.ts";
import { withTempDir } from "../helpers/temp_dir.ts";
import { installDirs, nodeDirs } from "./node_dirs.ts";

const ignore = TMPFS_UNAVAILABLE !== undefined;

Deno.test({
  name: "one mount for the manifest dirs is ok; a read-only one an error; two mounts a warning",
  ignore,
  fn: () =>
    withTmpfs(ROOM_FLOOR_BYTES * 2, async (fs) => {
      const config = nodeDirs(fs.dir);
      await installDirs(config);
      const mounts = async () =>
        (await directoryFindings(config)).filter((f) => f.check === "mount");
      const [one] = await mounts();
      assertEquals(one.level, "ok", one.found);
      assert(one.found.includes(`one mount (${fs.dir})`), one.found);

      await fs.readOnly(true);
      const readOnly = await mounts();
      assertEquals(
        readOnly.map((f) => [f.level, f.subject]),
        [
          ["error", config.staticPodDir],
          ["error", config.inactiveDir],
          ["error", config.secretsDir],
          ["error", config.configmapsDir],
          ["warning", config.stateDir],
          ["warning", `${fs.dir}/run/ckpt-agent`],
          ["ok", `${config.staticPodDir}, ${config.inactiveDir}`],
        ],
      );
      assert(readOnly[0].found.includes(`read-only mount (${fs.dir})`), readOnly[0].found);
      assertEquals(
        readOnly[0].fix,
        `remount ${fs.dir} read-write, or move staticPodDir to a writable file system`,
      );
      await fs.readOnly(false);

      await withTempDir(async (elsewhere) => {
        const split = { ...config, inactiveDir: `${elsewhere}/inactive-manifests` };
        const [two] = (await directoryFindings(split)).filter((f) => f.check === "mount");
        assertEquals(two.level, "warning");
        assert(two.found.includes(`staticPodDir is on mount ${fs.dir}`), two.found);
        assert(two.found.includes("fails on a full disk"), two.found);
      });
    }),
});

Deno.test({
  name: "a file system with less room than the floor is a warning naming it",
  ignore,
  fn: () =>
    withTmpfs(1024 * 1024, async (fs) => {
      const config = nodeDirs(fs.dir);
      await installDirs(config);
      const room = (await directoryFindings(config)).filter((f) => f.check === "disk-room");
      assertEquals(room.map((f) => f.level), ["warning"]);
      assert(room[0].found.includes(`(${fs.dir}/etc/kubernetes/manifests)`), room[0].found);
      assert(room[0].found.includes("needed: the floor of 16.0 MiB"), room[0].found);
      assertEquals(
        room[0].fix,
        `free space on the file system of ${config.staticPodDir} (\`df -h ${config.staticPodDir}\`)`,
      );
    }),
});
