/**
 * The kubelet's and the runtime's answers, when byte for byte the last ones, are not parsed again
 * (lib/sources/answer_memo.ts): passes after passes with the same answers must still decide as a
 * fresh agent would when an answer changes or a deadline passes.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { DaemonFixture } from "../admin/harness.ts";

function jsonFiles(dir: string): string[] {
  return [...Deno.readDirSync(dir)].map((e) => e.name).filter((name) => name.endsWith(".json"))
    .sort();
}

Deno.test("after passes with repeated answers: a loss activates, the return withdraws, a deleted parent goes when its grace ends", async () => {
  const f = await DaemonFixture.start();
  try {
    await f.pass();
    const checkpoints = jsonFiles(f.config.inactiveDir);
    assertEquals(checkpoints.length > 0, true);
    for (let i = 0; i < 3; i++) assertEquals((await f.pass()).applied, [], `idle pass ${i + 1}`);

    await f.node.loseControlPlane();
    await f.pass();
    assertEquals(jsonFiles(f.config.staticPodDir), checkpoints);
    for (let i = 0; i < 2; i++) await f.pass();
    assertEquals(jsonFiles(f.config.staticPodDir), checkpoints);

    await f.node.restoreControlPlane();
    for (let i = 0; i < 3; i++) await f.pass();
    assertEquals(jsonFiles(f.config.staticPodDir), []);
    assertEquals(jsonFiles(f.config.inactiveDir), checkpoints);

    const [gone] = f.node.parents;
    const goneId = `${gone.metadata.namespace}/${gone.metadata.name}`;
    await f.node.deleteParent(goneId);
    for (let i = 0; i < 2; i++) await f.pass();
    assertEquals(jsonFiles(f.config.inactiveDir), checkpoints, "kept during its grace period");
    f.clock.advance(f.config.checkpointGracePeriodMs);
    await f.pass();
    assertEquals(jsonFiles(f.config.inactiveDir).length, checkpoints.length - 1);
  } finally {
    await f.close();
  }
});
