/**
 * The real daemon on a simulated node, through problems that last many passes, on the test's
 * clock: each is said once when it starts (naming what failed) and once when it ends, however
 * many passes it lasts; in between only at debug.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { controlPlane } from "../../lib/sim/control_plane.ts";
import { DaemonFixture, type LogLine } from "../admin/harness.ts";

const POLL_MS = 5_000;

/** Runs `count` passes, one poll interval apart; returns their reports' completeness. */
async function passes(f: DaemonFixture, count: number): Promise<boolean[]> {
  const complete: boolean[] = [];
  for (let i = 0; i < count; i++) {
    f.clock.advance(POLL_MS);
    complete.push((await f.pass()).complete);
  }
  return complete;
}

const atLeastWarn = (lines: LogLine[]) =>
  lines.filter((l) => l.level === "warn" || l.level === "error");

Deno.test("an outage of many passes: its degradation and its failing sources said once at warn when it starts, once at info when it ends", async () => {
  const f = await DaemonFixture.start({ pollIntervalMs: POLL_MS });
  try {
    assertEquals(await passes(f, 1), [true]);
    const from = f.log.lines.length;
    await f.node.loseControlPlane();
    assertEquals(await passes(f, 3), [false, false, false]);
    const early = atLeastWarn(f.log.lines.slice(from));
    assertEquals(await passes(f, 117), Array(117).fill(false));
    const outage = f.log.lines.slice(from);
    // 120 passes, ten minutes: no more said at warn than in the first three.
    assertEquals(atLeastWarn(outage), early);
    assertEquals(
      early.map((l) => [l.level, l.msg, l.source]),
      [
        ["warn", "source unavailable", "apiserver"],
        ["warn", "source unavailable", "kubelet"],
        ["warn", "pass degraded", undefined],
      ],
    );
    // The degradation names what failed, not what asked for the pass.
    const [degraded] = f.log.find("pass degraded");
    assert(String(degraded.apiserver).startsWith("unreachable: "), String(degraded.apiserver));
    assert(String(degraded.kubelet).startsWith("forbidden: "), String(degraded.kubelet));
    assertEquals(degraded.reasons, undefined);
    // While it lasts, at debug on every pass.
    assertEquals(
      f.log.find("pass degraded").filter((l) => l.level === "debug").length,
      119,
    );

    const back = f.log.lines.length;
    await f.node.restoreControlPlane();
    assertEquals(await passes(f, 3), [true, true, true]);
    const after = f.log.lines.slice(back).filter((l) => l.level !== "debug");
    assertEquals(atLeastWarn(after), []);
    const ended = after.filter((l) => l.msg !== "state change");
    assertEquals(ended.map((l) => [l.level, l.msg, l.source, l.lasted]), [
      ["info", "source answers again", "apiserver", "10m0s"],
      ["info", "source answers again", "kubelet", "10m0s"],
      ["info", "passes complete again", undefined, "10m0s"],
    ]);
    assertEquals(ended[2].degradedPasses, 120);
  } finally {
    await f.close();
  }
});

Deno.test("a volume whose object is missing: said once at warn when it starts, at info when its files are stored again", async () => {
  const f = await DaemonFixture.start({ pollIntervalMs: POLL_MS, refreshIntervalMs: POLL_MS });
  try {
    assertEquals(await passes(f, 1), [true]);
    const secret = controlPlane(f.node.nodeName).secrets.find((s) => s.name === "kube-apiserver");
    assert(secret);
    f.node.apiServer.deleteSecret("kube-system", "kube-apiserver");
    const from = f.log.lines.length;
    await passes(f, 3);
    const early = atLeastWarn(f.log.lines.slice(from));
    await passes(f, 57);
    assertEquals(atLeastWarn(f.log.lines.slice(from)), early);
    assertEquals(early.map((l) => [l.level, l.msg, l.id, l.volume]), [
      ["warn", "volume files kept as they were", "kube-system/kube-apiserver-7x2kq", "secrets"],
    ]);
    assert(String(early[0].reason).includes("kube-apiserver"), String(early[0].reason));

    f.node.apiServer.setSecret("kube-system", "kube-apiserver", secret.data);
    const back = f.log.lines.length;
    await passes(f, 3);
    assertEquals(
      f.log.lines.slice(back).filter((l) => l.level !== "debug").map((l) => [
        l.level,
        l.msg,
        l.volume,
        l.lasted,
      ]),
      [["info", "volume files stored again", "secrets", "5m0s"]],
    );
  } finally {
    await f.close();
  }
});

Deno.test("a manifest that is not a pod: said once at warn while it stays, at info once it is gone", async () => {
  const f = await DaemonFixture.start({ pollIntervalMs: POLL_MS });
  try {
    assertEquals(await passes(f, 1), [true]);
    const file = join(f.config.staticPodDir, "installer-leftover.yaml");
    await Deno.writeTextFile(file, "apiVersion: v1\nkind: Service\n");
    const from = f.log.lines.length;
    await passes(f, 20);
    assertEquals(atLeastWarn(f.log.lines.slice(from)).map((l) => [l.level, l.msg, l.file]), [
      ["warn", "manifest is not a pod; left alone", file],
    ]);
    await Deno.remove(file);
    const back = f.log.lines.length;
    await passes(f, 2);
    assertEquals(
      f.log.lines.slice(back).filter((l) => l.level !== "debug").map((l) => [l.msg, l.file]),
      [["manifest file removed, or a pod now", file]],
    );
  } finally {
    await f.close();
  }
});
