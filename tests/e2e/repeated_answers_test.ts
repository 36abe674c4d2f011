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

for (const readonlyPort of [false, true]) {
  // With the read-only port, the kubelet still answers while the API server is gone: its kept,
  // frozen pods are then the parents the pass plans and checkpoints from.
  const kubelet = readonlyPort ? "the kubelet's read-only port" : "the secure port only";
  Deno.test(`after passes with repeated answers (${kubelet}): a loss activates, the return withdraws, a deleted parent goes when its grace ends`, async () => {
    const f = await DaemonFixture.start({}, { kubeletReadonlyPort: readonlyPort });
    try {
      await f.pass();
      const checkpoints = jsonFiles(f.config.inactiveDir);
      assertEquals(checkpoints.length > 0, true);
      for (let i = 0; i < 3; i++) assertEquals((await f.pass()).applied, [], `idle pass ${i + 1}`);

      await f.node.loseControlPlane();
      const lost = await f.pass();
      const kubeletFailed = lost.failures.some((failure) => failure.source === "kubelet");
      assertEquals(kubeletFailed, !readonlyPort);
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
}
