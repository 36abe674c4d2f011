/**
 * A checkpoint's versions on disk, in real temp dirs: the version in place read from the files
 * (a manifest from before versions adopted as version 1), and pruning that removes a version's
 * files only once no manifest left mounts them.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { join } from "node:path";
import {
  type CheckpointTrees,
  versionOfDirName,
  versionRoot,
  versionsDir,
  versionsMounted,
} from "../../lib/core/checkpoint_layout.ts";
import { CHECKPOINT_OF_ANNOTATION, type Pod } from "../../lib/core/pod.ts";
import { pathExists } from "../../lib/disk/dirs.ts";
import { renderManifest } from "../../lib/disk/manifests.ts";
import {
  nextVersion,
  pruneVersions,
  readKept,
  readOrigin,
  readStoredVersions,
  writeOrigin,
  writeVersionManifest,
} from "../../lib/disk/versions.ts";
import { withTempDir } from "../helpers/temp_dir.ts";

const ID = "kube-system/kcm";
const PARENT: Pod = { metadata: { namespace: "kube-system", name: "kcm", uid: "u" } };

function trees(root: string): CheckpointTrees {
  return {
    staticPodDir: join(root, "manifests"),
    inactiveDir: join(root, "inactive"),
    secretsDir: join(root, "secrets"),
    configmapsDir: join(root, "configmaps"),
  };
}

/** A checkpoint manifest of version `version`, mounting one secret of that version. */
function manifest(t: CheckpointTrees, version: number, flag: string): string {
  const pod: Pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      namespace: "kube-system",
      name: "kcm",
      annotations: { [CHECKPOINT_OF_ANNOTATION]: "kcm" },
    },
    spec: {
      containers: [{ name: "c", image: "kcm", command: [flag] }],
      volumes: [{
        name: "s",
        hostPath: { path: `${versionRoot(t.secretsDir, "kube-system", "kcm", version)}/secret` },
      }],
    },
  };
  return renderManifest(pod);
}

async function storeFiles(t: CheckpointTrees, version: number) {
  const dir = `${versionRoot(t.secretsDir, "kube-system", "kcm", version)}/secret`;
  await Deno.mkdir(dir, { recursive: true });
  await Deno.writeTextFile(join(dir, "key"), `version ${version}`);
}

Deno.test("layout: version directories and what a manifest mounts", () => {
  const t = trees("/r");
  assertEquals(versionRoot("/s", "ns", "p", 1), "/s/ns/p");
  assertEquals(versionRoot("/s", "ns", "p", 12), "/s/ns/p/_v12");
  for (const bad of [0, -1, 1.5, Number.NaN]) {
    let threw = false;
    try {
      versionRoot("/s", "ns", "p", bad);
    } catch {
      threw = true;
    }
    assertEquals(threw, true, String(bad));
  }
  const rows: [string, number | undefined][] = [
    ["_v2", 2],
    ["_v10", 10],
    ["_v0", undefined],
    ["_v01", undefined],
    ["_volumes", undefined],
    ["secret", undefined],
  ];
  for (const [name, version] of rows) assertEquals(versionOfDirName(name), version, name);
  assertEquals(versionsDir(t, ID), "/r/inactive/.versions/kube-system_kcm");
  const pod = JSON.parse(manifest(t, 3, "--a"));
  assertEquals([...versionsMounted(t, ID, pod)], [3]);
  assertEquals([...versionsMounted(t, ID, JSON.parse(manifest(t, 1, "--a")))], [1]);
});

Deno.test("readKept: a manifest from before versions is adopted as version 1; a foreign one is not", async () => {
  await withTempDir(async (root) => {
    const t = trees(root);
    const inactive = join(t.inactiveDir, "kube-system-kcm.json");
    await Deno.mkdir(t.inactiveDir, { recursive: true });
    assertEquals(await readKept(t, ID, inactive), { stored: { versions: [], problems: [] } });

    await Deno.writeTextFile(inactive, '{"metadata": {"namespace": "kube-system", "name": "x"}}');
    assertEquals((await readKept(t, ID, inactive)).kept, undefined, "not this checkpoint");

    const old = manifest(t, 1, "--old");
    await Deno.writeTextFile(inactive, old);
    const kept = await readKept(t, ID, inactive);
    assertEquals([kept.kept, kept.text], [1, old]);
    assertEquals(await Deno.readTextFile(join(versionsDir(t, ID), "1.json")), old);
    assertEquals(nextVersion(kept.stored, kept.kept), 2);
    // Read again: found, not adopted twice.
    assertEquals((await readKept(t, ID, inactive)).stored.versions.length, 1);
  });
});

Deno.test("pruneVersions: the newest N and the kept one stay; files go only when nothing mounts them", async () => {
  await withTempDir(async (root) => {
    const t = trees(root);
    for (const v of [1, 2, 3, 4]) {
      await writeOrigin(t, ID, v, { madeAt: `2026-12-01T10:00:0${v}Z`, parent: PARENT });
      await writeVersionManifest(t, ID, v, manifest(t, v, `--v${v}`));
      await storeFiles(t, v);
    }
    // A stray directory of a version no manifest names (a promotion cut short).
    await storeFiles(t, 9);
    // Version 2 is in place (a rollback), and the active manifest is version 1's: both stay
    // mounted, whatever the count says.
    const removed = await pruneVersions(t, ID, {
      keep: 2,
      kept: 2,
      inUse: [manifest(t, 2, "--v2"), manifest(t, 1, "--v1")],
    });
    assertEquals(removed, [1]);
    assertEquals((await readStoredVersions(t, ID)).versions.map((v) => v.version), [2, 3, 4]);
    // What a version was made from goes with it.
    assertEquals(await readOrigin(t, ID, 1), undefined);
    assertEquals((await readOrigin(t, ID, 2))?.madeAt, "2026-12-01T10:00:02Z");
    const stored = async (v: number) =>
      await pathExists(versionRoot(t.secretsDir, "kube-system", "kcm", v) + "/secret/key");
    assertEquals(
      [await stored(1), await stored(2), await stored(3), await stored(4), await stored(9)],
      [true, true, true, true, false],
    );
    // Once nothing mounts version 1, its files (the pod directory's own) go too; the others stay.
    await pruneVersions(t, ID, { keep: 2, kept: 2, inUse: [manifest(t, 2, "--v2")] });
    assertEquals(
      [await stored(1), await stored(2), await stored(3), await stored(4)],
      [false, true, true, true],
    );
  });
});
