/**
 * Crash test of promotion: an agent process promotes a parent's new spec (new flags, a new
 * secret) and is killed with SIGKILL at a random moment, again and again, each time with a new
 * spec. After every kill, the checkpoint's inactive manifest and every version kept must each be
 * whole and mount files of their own generation, all present: never a manifest without its
 * files, never files of another version. The next process finishes or redoes what was cut.
 *
 * The normal run kills 12 times; any count is
 * `CKPT_PROMOTION_KILLS=N deno test --allow-all tests/pass/promotion_crash_test.ts`.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { hostPathsOf, versionOfFileName, versionsDir } from "../../lib/core/checkpoint_layout.ts";
import { asArray, type Json } from "../../lib/core/json.ts";
import type { Pod } from "../../lib/core/pod.ts";
import type { Config } from "../../lib/config/types.ts";
import { TEMP_MARKER } from "../../lib/disk/atomic_write.ts";
import { SimNode } from "../../lib/sim/node.ts";
import { runChild } from "../helpers/crash_child.ts";

const KILLS = Number(Deno.env.get("CKPT_PROMOTION_KILLS") ?? "12");
const CHILD = new URL("./promotion_crash_child.ts", import.meta.url).pathname;
const ID = "kube-system/kube-controller-manager-m4t9z";
const FILE = "kube-system-kube-controller-manager-m4t9z.json";

function generationOf(pod: Pod): string {
  const command = asArray((pod.spec as Json).containers)[0].command as string[];
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

/** The manifest in place and every version kept. */
async function assertAllWhole(c: Config, when: string) {
  const inactive = await Deno.readTextFile(join(c.inactiveDir, FILE));
  await assertWhole(inactive, c.secretsDir, `${when}: in place`);
  const dir = versionsDir(c, ID);
  for (const entry of Deno.readDirSync(dir)) {
    if (versionOfFileName(entry.name) === undefined) continue;
    const text = await Deno.readTextFile(join(dir, entry.name));
    await assertWhole(text, c.secretsDir, `${when}: ${entry.name}`);
  }
}

Deno.test(`promotion survives ${KILLS} SIGKILLs: the manifest in place and every version stay whole`, async () => {
  const node = await SimNode.start();
  try {
    const c = node.config({ promoteAfterMs: 0, checkpointVersions: 2 });
    const config = await node.writeConfigFile({ promoteAfterMs: 0, checkpointVersions: 2 });
    const spec = async (generation: number) => {
      node.apiServer.setSecret("kube-system", "kube-controller-manager", {
        "ca.crt": "ca\n",
        "service-account.key": `key of generation ${generation}\n`,
      });
      await node.updateParent(ID, (pod) => {
        const container = asArray((pod.spec as Json).containers)[0];
        container.command = [
          ...(container.command as string[]).filter((a) => !a.startsWith("--generation=")),
          `--generation=${generation}`,
        ];
        return pod;
      });
    };
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
