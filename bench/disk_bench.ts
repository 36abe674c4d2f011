/**
 * What the disk side costs a pass in the steady state (nothing changed): reading a manifest
 * directory, and re-checking the files of every checkpoint's volumes.
 * Run: deno bench --allow-all bench/disk_bench.ts
 */
import { readManifestDir, renderManifest } from "../lib/disk/manifests.ts";
import { type ObjectData, writeVolumeFiles } from "../lib/disk/pod_files.ts";
import type { VolumeFiles } from "../lib/core/sanitize.ts";
import { checkpoint } from "../tests/helpers/pods.ts";

const PODS = 20, VOLUMES = 3, KEYS = 5;
const root = await Deno.makeTempDir();
globalThis.addEventListener("unload", () => Deno.removeSync(root, { recursive: true }));

await Deno.mkdir(`${root}/manifests`);
for (let i = 0; i < 50; i++) {
  await Deno.writeTextFile(
    `${root}/manifests/ns-pod-${i}.json`,
    renderManifest(checkpoint(`ns/pod-${i}`)),
  );
}

const objects: ObjectData = new Map();
const volumes: VolumeFiles[] = [];
for (let p = 0; p < PODS; p++) {
  for (let v = 0; v < VOLUMES; v++) {
    const name = `s-${p}-${v}`;
    const data: Record<string, Uint8Array> = {};
    for (let k = 0; k < KEYS; k++) data[`key-${k}`] = new Uint8Array(2048).fill(k);
    objects.set(`secret/${name}`, data);
    volumes.push({
      volume: name,
      dir: `${root}/secrets/ns/pod-${p}/${name}`,
      sources: [{ kind: "secret", name, optional: false }],
    });
  }
}
const owner = { uid: 1000, gid: 1000 };
await writeVolumeFiles(volumes, objects, owner);

Deno.bench("readManifestDir, 50 checkpoint manifests", async () => {
  await readManifestDir(`${root}/manifests`);
});

Deno.bench(`writeVolumeFiles, ${PODS * VOLUMES * KEYS} files of 2 KiB, all unchanged`, async () => {
  const summary = await writeVolumeFiles(volumes, objects, owner);
  if (summary.written !== 0) throw new Error("expected nothing written");
});
