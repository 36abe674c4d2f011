/**
 * A parent's volumes against the node, end to end through `ckpt-agent --once` on a simulated
 * node: secret and configMap names that are no object's (the API server lets `t/u` through)
 * beside links planted where the agent would once have nested their directories, and a mount
 * the parent left writable (docs/design.md#volumes, docs/design.md#no-links).
 */
import assert, { deepStrictEqual as assertEquals } from "node:assert/strict";
import { join } from "node:path";
import { manifestFileName } from "../../lib/core/checkpoint_layout.ts";
import type { Pod } from "../../lib/core/pod.ts";
import type { PassReport } from "../../lib/pass/report.ts";
import { runCli } from "../helpers/cli.ts";
import { withNode } from "../helpers/sim_node.ts";
import { tree } from "../helpers/tree.ts";

const SCHEDULER = "kube-system/kube-scheduler-q8w2c";

/** The scheduler as a tenant would have written it: its own user, names that nest, writable. */
function withHostileVolumes(pod: Pod): Pod {
  const spec = pod.spec as {
    securityContext?: Record<string, unknown>;
    containers: { volumeMounts?: Record<string, unknown>[] }[];
    volumes?: Record<string, unknown>[];
  };
  spec.securityContext = { runAsUser: 1000 };
  spec.volumes = [
    ...spec.volumes ?? [],
    { name: "nested", secret: { secretName: "t/u", optional: true } },
    { name: "deeper", secret: { secretName: "t/u/w/manifests", optional: true } },
  ];
  for (const container of spec.containers) {
    container.volumeMounts = [
      ...(container.volumeMounts ?? []).map((m) => ({ ...m, readOnly: false })),
      { name: "nested", mountPath: "/nested" },
      { name: "deeper", mountPath: "/deeper" },
    ];
  }
  return pod;
}

Deno.test("names no object can have, beside planted links, reach nothing outside; every stored mount is read-only", async () => {
  await withNode(async (node, configFile) => {
    await node.updateParent(SCHEDULER, withHostileVolumes);
    const c = node.config();
    const podDir = join(c.secretsDir, SCHEDULER);
    // Where `t/u/w/manifests` would have been nested: a link to the static-pod dir.
    await Deno.mkdir(podDir, { recursive: true, mode: 0o700 });
    await Deno.symlink(c.staticPodDir, join(podDir, "t"));
    const staticPods = await tree(c.staticPodDir, { stamps: true });
    const staticPodDir = await Deno.stat(c.staticPodDir);

    const run = await runCli(["--once", "--config", configFile, "--output", "json"]);
    const report = JSON.parse(run.stdout) as PassReport;
    assertEquals([run.code, report.errors], [0, []], run.stderr);
    assert(run.stderr.includes('secret name \\"t/u\\" is not a valid name'), run.stderr);

    assertEquals(await tree(c.staticPodDir, { stamps: true }), staticPods);
    const after = await Deno.stat(c.staticPodDir);
    assertEquals([after.uid, after.gid, after.mode], [
      staticPodDir.uid,
      staticPodDir.gid,
      staticPodDir.mode,
    ]);
    // The link was nobody's volume: removed as a link, never followed.
    assertEquals(await Deno.lstat(join(podDir, "t")).catch(() => "gone"), "gone");

    const manifest = JSON.parse(
      await Deno.readTextFile(join(c.inactiveDir, manifestFileName(SCHEDULER))),
    );
    const volumes = new Map<string, string>(
      manifest.spec.volumes.map((v: { name: string; hostPath?: { path: string } }) => [
        v.name,
        v.hostPath?.path,
      ]),
    );
    assertEquals(volumes.get("nested"), join(podDir, "_volumes/nested"));
    assertEquals(volumes.get("deeper"), join(podDir, "_volumes/deeper"));
    for (const mount of manifest.spec.containers.flatMap((x: Pod["spec"]) => x!.volumeMounts)) {
      if (volumes.get(mount.name)?.startsWith(c.secretsDir)) {
        assertEquals(mount.readOnly, true, mount.name);
      }
    }
    // Its files are its user's to read, in directories only root can change.
    for (const [path, entry] of Object.entries(await tree(podDir))) {
      if (entry.type === "dir") assertEquals([entry.uid, entry.mode & 0o022], [0, 0], path);
      else assertEquals([entry.uid, entry.gid, entry.mode], [1000, 0, 0o600], path);
    }
  });
});

Deno.test("a parent whose secrets exceed checkpointMaxSize is refused by name and size; the others go on", async () => {
  await withNode(async (node) => {
    const big = Array.from({ length: 3 }, (_, i) => `big-${i}`);
    for (const name of big) {
      node.apiServer.setSecret("kube-system", name, { blob: new Uint8Array(2 ** 20).fill(7) });
    }
    await node.updateParent(SCHEDULER, (pod) => {
      const spec = pod.spec as { volumes?: Record<string, unknown>[] };
      spec.volumes = [
        ...spec.volumes ?? [],
        ...big.map((name) => ({ name, secret: { secretName: name } })),
      ];
      return pod;
    });
    const configFile = await node.writeConfigFile({ checkpointMaxBytes: 2 * 2 ** 20 });
    const run = await runCli(["--once", "--config", configFile, "--output", "json"]);
    const report = JSON.parse(run.stdout) as PassReport;
    assertEquals(run.code, 1, run.stderr);
    assertEquals(report.errors.map((e) => [e.op, e.id]), [["checkpoint", SCHEDULER]]);
    assert(
      report.errors[0].message.startsWith(
        "its stored files would take 3.0 MiB (volume big-0 1.0 MiB",
      ),
      report.errors[0].message,
    );
    assert(report.errors[0].message.includes("more than checkpointMaxSize (2.0 MiB)"));
    const c = node.config();
    for (const name of big) {
      await assert.rejects(() => Deno.lstat(join(c.secretsDir, SCHEDULER, name)));
    }
    // The other parents are checkpointed with their files as ever.
    const stored = Object.keys(await tree(c.secretsDir));
    assert(stored.some((p) => p.startsWith("kube-system/kube-apiserver-7x2kq/")), stored.join());
  });
});

Deno.test("a parent requiring a secret no object can be named as is refused once, by name, and never written", async () => {
  await withNode(async (node, configFile) => {
    await node.updateParent(SCHEDULER, (pod) => {
      const spec = pod.spec as { volumes?: Record<string, unknown>[] };
      spec.volumes = [...spec.volumes ?? [], { name: "nested", secret: { secretName: "t/u" } }];
      return pod;
    });
    const c = node.config();
    for (let run = 0; run < 2; run++) {
      const once = await runCli(["--once", "--config", configFile, "--output", "json"]);
      const report = JSON.parse(once.stdout) as PassReport;
      // One parent's refusal is no failure of the pass: the others are checkpointed as ever.
      assertEquals([once.code, report.errors, report.complete], [0, [], true], once.stderr);
      const said = once.stderr.split("\n").filter((l) => l.includes("cannot be checkpointed"));
      assertEquals(said.length, 1, once.stderr);
      assert(said[0].includes(SCHEDULER) && said[0].includes('secret name \\"t/u\\"'), said[0]);
    }
    await assert.rejects(() => Deno.lstat(join(c.inactiveDir, manifestFileName(SCHEDULER))));
    await assert.rejects(() => Deno.lstat(join(c.secretsDir, SCHEDULER)));
  });
});
