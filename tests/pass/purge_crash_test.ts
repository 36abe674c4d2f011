/**
 * Crash test of purge: a checkpoint with versions, active, is purged (`--force`) by a process
 * killed with SIGKILL at a random moment, again and again. After every kill, no manifest is
 * left without its files: an active manifest only beside its inactive one, and every manifest
 * left (active, inactive, each version's) mounts files that are all there. A purge run again
 * then removes whatever the kill left, the status record included.
 *
 * The normal run kills 12 times; any count is
 * `CKPT_PURGE_KILLS=N deno test --allow-all tests/pass/purge_crash_test.ts`.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import {
  checkpointPaths,
  hostPathsOf,
  manifestFileName,
  versionFileName,
  versionsDir,
} from "../../lib/core/checkpoint_layout.ts";
import type { Config } from "../../lib/config/types.ts";
import { pathExists } from "../../lib/disk/dirs.ts";
import { activateCheckpoint } from "../../lib/disk/manifests.ts";
import { readStoredVersions } from "../../lib/disk/versions.ts";
import { readStatusRecords } from "../../lib/store/status_store.ts";
import { type AgentOnNode, withAgentOnNode } from "../helpers/agent_on_node.ts";
import { runChild } from "../helpers/crash_child.ts";
import { containerOf } from "../helpers/promotion.ts";

const KILLS = Number(Deno.env.get("CKPT_PURGE_KILLS") ?? "12");
const CHILD = new URL("./purge_crash_child.ts", import.meta.url).pathname;
const ID = "kube-system/kube-controller-manager-m4t9z";
const FILE = manifestFileName(ID);

/** Every manifest of the checkpoint still on disk, by where it is. */
async function manifestsLeft(c: Config): Promise<Map<string, string>> {
  const p = checkpointPaths(c, ID, FILE);
  const left = new Map<string, string>();
  for (const path of [p.activeManifest, p.inactiveManifest]) {
    if (await pathExists(path)) left.set(path, await Deno.readTextFile(path));
  }
  for (const { version, text } of (await readStoredVersions(c, ID)).versions) {
    left.set(join(versionsDir(c, ID), versionFileName(version)), text);
  }
  return left;
}

/** No manifest without its files, and no active copy without its inactive manifest. */
async function assertNoManifestWithoutFiles(c: Config, when: string) {
  const p = checkpointPaths(c, ID, FILE);
  if (await pathExists(p.activeManifest)) {
    assert(await pathExists(p.inactiveManifest), `${when}: an active copy alone`);
  }
  for (const [path, text] of await manifestsLeft(c)) {
    const dirs = hostPathsOf(JSON.parse(text)).filter((d) =>
      d.startsWith(`${c.secretsDir}/`) || d.startsWith(`${c.configmapsDir}/`)
    );
    assert(dirs.length > 0, path);
    for (const dir of dirs) {
      assert(await pathExists(dir), `${when}: ${path} mounts ${dir}, which is gone`);
      assert([...Deno.readDirSync(dir)].length > 0, `${when}: ${dir} is empty`);
    }
  }
}

/** Nothing of the checkpoint is left: manifests, versions, files, status record. */
async function assertNothingLeft(c: Config, when: string) {
  assertEquals([...(await manifestsLeft(c)).keys()], [], when);
  const p = checkpointPaths(c, ID, FILE);
  for (const path of [versionsDir(c, ID), p.secretsDir, p.configmapsDir]) {
    assertEquals(await pathExists(path), false, `${when}: ${path}`);
  }
  const records = await readStatusRecords(c.stateDir);
  assertEquals(records.filter((r) => r.id === ID), [], when);
}

/** The checkpoint made again, with two versions, and active (as the kubelet would run it). */
async function checkpointWithVersions(n: AgentOnNode, c: Config, round: number) {
  await n.restart();
  for (const flag of [`--round=${round}`, `--round=${round}b`]) {
    await n.node.updateParent(ID, (pod) => {
      const container = containerOf(pod);
      container.command = [
        ...(container.command as string[]).filter((a) => !a.startsWith("--round=")),
        flag,
      ];
      return pod;
    });
    assertEquals((await n.pass()).errors, []);
  }
  assertEquals(await activateCheckpoint(c, ID, FILE), "written");
  assertEquals([...(await manifestsLeft(c)).keys()].length, 4, "active, inactive, 2 versions");
}

Deno.test(`purge survives ${KILLS} SIGKILLs: never a manifest without its files`, async () => {
  const overrides = { promoteAfterMs: 0, checkpointVersions: 2 };
  await withAgentOnNode({}, overrides, async (n) => {
    const c = n.config();
    const config = await n.node.writeConfigFile(overrides);
    // How long a purge takes here: the kills land anywhere within it.
    await checkpointWithVersions(n, c, 0);
    const timed = await runChild(CHILD, [config, ID]);
    assert(timed.out.includes("done purged"), timed.out);
    await assertNothingLeft(c, "after a whole purge");
    const killWithinMs = timed.passMs * 1.2;
    let kills = 0, finished = 0;
    /** After each kill, how many of the four manifests were left. */
    const left: number[] = [];
    for (let round = 1; kills < KILLS; round++) {
      await checkpointWithVersions(n, c, round);
      const run = await runChild(CHILD, [config, ID], killWithinMs);
      if (run.finished) finished++;
      else kills++;
      await assertNoManifestWithoutFiles(c, `after round ${round}`);
      if (!run.finished) left.push((await manifestsLeft(c)).size);
      // The next purge finishes what the kill cut short.
      const again = await runChild(CHILD, [config, ID]);
      assert(again.finished, again.out);
      await assertNothingLeft(c, `after round ${round}, purged again`);
      // Bounded: a run that is never killed would not end the test otherwise.
      assert(round < KILLS * 20, `only ${kills} of ${round} runs were killed`);
    }
    console.log(
      `${kills} kills, ${finished} purges finished first; manifests left: ${left.join(" ")}`,
    );
  });
});
