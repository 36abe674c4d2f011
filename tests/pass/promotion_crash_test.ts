/**
 * Crash test of promotion: an agent process promotes a parent's new spec (new flags, a new
 * secret) and is killed with SIGKILL at a random moment, again and again, each time with a new
 * spec. After every kill, the checkpoint's inactive manifest and every version kept must each be
 * whole and mount files of their own generation, all present: never a manifest without its
 * files, never files of another version. The next process finishes or redoes what was cut.
 * The same for inheritance: a DaemonSet rollout's new pod, its pass killed, has no version yet
 * or a whole one inherited from its predecessor, mounting copies of its own.
 *
 * The normal run kills 12 times; any count is
 * `CKPT_PROMOTION_KILLS=N deno test --allow-all tests/pass/promotion_crash_test.ts`.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import {
  checkpointPaths,
  hostPathsOf,
  manifestFileName,
  versionsDir,
} from "../../lib/core/checkpoint_layout.ts";
import { type Pod, podId } from "../../lib/core/pod.ts";
import { pathExists } from "../../lib/disk/dirs.ts";
import type { Config } from "../../lib/config/types.ts";
import { TEMP_MARKER } from "../../lib/disk/atomic_write.ts";
import { SimNode } from "../../lib/sim/node.ts";
import { readStoredVersions } from "../../lib/disk/versions.ts";
import { runChild } from "../helpers/crash_child.ts";
import { containerOf } from "../helpers/promotion.ts";

const KILLS = Number(Deno.env.get("CKPT_PROMOTION_KILLS") ?? "12");
const CHILD = new URL("./promotion_crash_child.ts", import.meta.url).pathname;
const ID = "kube-system/kube-controller-manager-m4t9z";
const FILE = "kube-system-kube-controller-manager-m4t9z.json";

function generationOf(pod: Pod): string {
  const command = containerOf(pod).command as string[];
  return command.find((a) => a.startsWith("--generation="))?.slice(13) ?? "0";
}

/** A manifest and the files it mounts belong to one generation, every file present. */
async function assertWhole(text: string, secretsDir: string, what: string) {
  const pod = JSON.parse(text) as Pod;
  const generation = generationOf(pod);
  const dirs = hostPathsOf(pod).filter((d) => d.startsWith(`${secretsDir}/`));
  const secret = dirs.find((d) => d.endsWith("/kube-controller-manager"))!;
  assert(secret, `${what}: mounts the secret`);
  assertEquals(
    await Deno.readTextFile(join(secret, "service-account.key")),
    `key of generation ${generation}\n`,
    `${what} (generation ${generation})`,
  );
  assertEquals(await Deno.readTextFile(join(secret, "ca.crt")), "ca\n", what);
  for (const dir of dirs) {
    const names = [...Deno.readDirSync(dir)].map((e) => e.name);
    assert(names.length > 0 && !names.some((n) => n.includes(TEMP_MARKER)), `${what}: ${dir}`);
  }
}

/** The manifest in place and every version kept, each mounting `id`'s own files only. */
async function assertAllWhole(c: Config, when: string, id = ID) {
  const inactive = await Deno.readTextFile(join(c.inactiveDir, manifestFileName(id)));
  const own = `${checkpointPaths(c, id).secretsDir}/`;
  assert(await pathExists(versionsDir(c, id)), `${when}: no versions kept`);
  const texts = [inactive, ...(await readStoredVersions(c, id)).versions.map((v) => v.text)];
  for (const [i, text] of texts.entries()) {
    const what = `${when}: ${i === 0 ? "in place" : `version ${i}`}`;
    await assertWhole(text, c.secretsDir, what);
    const dirs = hostPathsOf(JSON.parse(text)).filter((d) => d.startsWith(`${c.secretsDir}/`));
    assert(dirs.every((d) => d.startsWith(own)), `${what}: ${dirs} are not all ${id}'s`);
  }
}

/** The secret of generation `generation`, and the parent `id` rolled out with its flag. */
function rollOut(node: SimNode, generation: number) {
  node.apiServer.setSecret("kube-system", "kube-controller-manager", {
    "ca.crt": "ca\n",
    "service-account.key": `key of generation ${generation}\n`,
  });
  return (pod: Pod) => {
    const container = containerOf(pod);
    container.command = [
      ...(container.command as string[]).filter((a) => !a.startsWith("--generation=")),
      `--generation=${generation}`,
    ];
    return pod;
  };
}

Deno.test(`promotion survives ${KILLS} SIGKILLs: the manifest in place and every version stay whole`, async () => {
  const node = await SimNode.start();
  try {
    const c = node.config({ promoteAfterMs: 0, checkpointVersions: 2 });
    const config = await node.writeConfigFile({ promoteAfterMs: 0, checkpointVersions: 2 });
    const spec = (generation: number) => node.updateParent(ID, rollOut(node, generation));
    await spec(0);
    assert((await runChild(CHILD, [config])).finished, "the first checkpoint");
    // How long a pass that promotes takes here: the kills land anywhere within it.
    await spec(1);
    const timed = await runChild(CHILD, [config]);
    assert(timed.out.includes("done []"), timed.out);
    const killWithinMs = timed.passMs * 1.2;
    let kills = 0, finished = 0, promotedBeforeKill = 0;
    for (let generation = 2; kills < KILLS; generation++) {
      await spec(generation);
      const run = await runChild(CHILD, [config], killWithinMs);
      if (run.finished) finished++;
      else kills++;
      const inPlace = generationOf(JSON.parse(await Deno.readTextFile(join(c.inactiveDir, FILE))));
      if (inPlace === String(generation)) promotedBeforeKill++;
      await assertAllWhole(c, `after generation ${generation}`);
      // Bounded: a run that is never killed would not end the test otherwise.
      assert(generation < KILLS * 20, `only ${kills} of ${generation} runs were killed`);
    }
    // A last process finishes whatever the last kill cut short.
    const last = await runChild(CHILD, [config]);
    assert(last.out.includes("done []"), last.out);
    await assertAllWhole(c, "at the end");
    console.log(`${kills} kills, ${finished} passes finished, ${promotedBeforeKill} in place`);
  } finally {
    await node.close();
  }
});

Deno.test(`inheritance survives ${KILLS} SIGKILLs: no version yet, or a whole one of its own`, async () => {
  const node = await SimNode.start();
  try {
    // Candidates are never promoted in this test: each new pod keeps generation 0's spec.
    const c = node.config({ checkpointVersions: 2 });
    const config = await node.writeConfigFile({ checkpointVersions: 2 });
    await node.updateParent(ID, rollOut(node, 0));
    assert((await runChild(CHILD, [config])).finished, "the first checkpoint");
    let current = ID;
    /** A DaemonSet rollout of generation `generation`: the new pod's id. */
    const rollout = async (generation: number) => {
      current = podId(await node.replaceParent(current, rollOut(node, generation)));
      return current;
    };
    const heir = await rollout(1);
    const timed = await runChild(CHILD, [config]);
    assert(timed.out.includes("done []"), timed.out);
    await assertAllWhole(c, "the first inheritance", heir);
    const killWithinMs = timed.passMs * 1.2;
    let kills = 0, inheritedBeforeKill = 0, cutMidway = 0;
    for (let generation = 2; kills < KILLS; generation++) {
      const id = await rollout(generation);
      const run = await runChild(CHILD, [config], killWithinMs);
      if (!run.finished) kills++;
      if (await pathExists(join(c.inactiveDir, manifestFileName(id)))) {
        inheritedBeforeKill++;
        await assertAllWhole(c, `generation ${generation}, cut`, id);
      } else if (await pathExists(checkpointPaths(c, id).secretsDir)) {
        cutMidway++; // files copied, no version in place yet
      }
      // The next pass inherits, or goes on with what it inherited: generation 0, whole.
      assert((await runChild(CHILD, [config])).out.includes("done []"));
      await assertAllWhole(c, `generation ${generation}`, id);
      const inPlace = await Deno.readTextFile(join(c.inactiveDir, manifestFileName(id)));
      assertEquals(generationOf(JSON.parse(inPlace)), "0");
      assert(generation < KILLS * 20, `only ${kills} of ${generation} runs were killed`);
    }
    console.log(
      `${kills} kills, ${inheritedBeforeKill} inherited before the kill, ${cutMidway} midway`,
    );
  } finally {
    await node.close();
  }
});
