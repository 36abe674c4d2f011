/** Reading a manifest directory with a cache: unchanged files are reused, changed ones re-read. */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { podId } from "../../lib/core/pod.ts";
import { type ManifestCache, readManifestDir, renderManifest } from "../../lib/disk/manifests.ts";
import { ParsedFiles, TRUSTED_AGE_MS } from "../../lib/disk/verified_files.ts";
import { checkpoint } from "../helpers/pods.ts";
import { withTempDir } from "../helpers/temp_dir.ts";

/** A cache whose reads happen long after the files were last changed. */
function settledCache(): ManifestCache {
  return new ParsedFiles(() => Date.now() + 10 * TRUSTED_AGE_MS);
}

Deno.test("unchanged files are reused, changed and new ones read, removed ones forgotten", async () => {
  await withTempDir(async (dir) => {
    const a = join(dir, "kube-system-a.json"), b = join(dir, "kube-system-b.json");
    await Deno.writeTextFile(a, renderManifest(checkpoint("kube-system/a")));
    await Deno.writeTextFile(b, "not a manifest {");
    const cache = settledCache();
    const first = await readManifestDir(dir, cache);
    assertEquals(first.pods.map(podId), ["kube-system/a"]);
    assertEquals(first.problems.length, 1);

    const second = await readManifestDir(dir, cache);
    assert(second.manifests[0] === first.manifests[0]);
    assert(second.problems[0] === first.problems[0]);
    assertEquals(second, await readManifestDir(dir));

    const changed = checkpoint("kube-system/a");
    changed.metadata.labels = { changed: "yes" };
    await Deno.writeTextFile(a, renderManifest(changed));
    await Deno.remove(b);
    await Deno.writeTextFile(
      join(dir, "kube-system-c.json"),
      renderManifest(checkpoint("kube-system/c")),
    );
    const third = await readManifestDir(dir, cache);
    assertEquals(third.pods.map(podId), ["kube-system/a", "kube-system/c"]);
    assertEquals(third.pods[0].metadata.labels, { changed: "yes" });
    assertEquals(third.problems, []);
    assertEquals(third, await readManifestDir(dir));
  });
});

Deno.test("a file changed just before it was read is read again next time", async () => {
  await withTempDir(async (dir) => {
    const a = join(dir, "kube-system-a.json");
    await Deno.writeTextFile(a, renderManifest(checkpoint("kube-system/a")));
    const ctime = (await Deno.stat(a)).ctime!.getTime();
    const cache: ManifestCache = new ParsedFiles(() => ctime);
    const first = await readManifestDir(dir, cache);
    const second = await readManifestDir(dir, cache);
    assert(second.manifests[0] !== first.manifests[0]);
    assertEquals(second, first);
  });
});
