/**
 * The disk side of a first pass on an empty node, alone: for each of N parents (two secrets and a
 * configmap of two keys each, as bench/pass_bench.ts's) the files a first checkpoint writes
 * (writeVersion, writeInactiveManifest, writeVolumeFiles), 8 parents at a time as the pass works,
 * then N records into one directory, 8 at a time as the stores write them. No API server, no
 * sanitizing beyond the volumes: what the write path costs. Under strace it counts the fsyncs.
 * Run: deno run --allow-all bench/first_pass_disk.ts [parents, 1000] [dir, /var/tmp]
 */
import { atomicWrite } from "../lib/disk/atomic_write.ts";
import { renderManifest, writeInactiveManifest } from "../lib/disk/manifests.ts";
import { writeVolumeFiles } from "../lib/disk/pod_files.ts";
import { writeVersion } from "../lib/disk/versions.ts";
import { sanitizeCheckpoint } from "../lib/core/sanitize.ts";
import { mapConcurrent } from "../lib/util/map_concurrent.ts";
import { parent } from "../tests/helpers/pods.ts";

const parents = Number(Deno.args[0] ?? 1000);
const root = await Deno.makeTempDir({ dir: Deno.args[1] ?? "/var/tmp", prefix: "first-pass-" });
const trees = {
  staticPodDir: `${root}/manifests`,
  inactiveDir: `${root}/inactive`,
  secretsDir: `${root}/secrets`,
  configmapsDir: `${root}/configmaps`,
};
const bytes = (n: number) => new Uint8Array(n).fill(65);
const each = Array.from({ length: parents }, (_, i) => i);

const started = performance.now();
await mapConcurrent(each, 8, async (i) => {
  const id = `kube-system/pod-${i}`;
  const base = parent(id);
  const pod = {
    ...base,
    spec: {
      ...base.spec,
      volumes: [
        { name: "s1", secret: { secretName: `s1-${i}` } },
        { name: "s2", secret: { secretName: `s2-${i}` } },
        { name: "c1", configMap: { name: `c1-${i}` } },
      ],
    },
  };
  const sanitized = sanitizeCheckpoint(pod, { ...trees, nodeName: "cp-1" });
  await writeVersion(trees, id, 1, {
    origin: { madeAt: new Date().toISOString(), parent: pod },
    manifest: renderManifest(sanitized.pod),
  });
  await writeInactiveManifest(trees, sanitized.pod, `kube-system-pod-${i}.json`);
  const objects = new Map([
    [`secret/s1-${i}`, { a: bytes(100), b: bytes(200) }],
    [`secret/s2-${i}`, { a: bytes(100), b: bytes(200) }],
    [`configMap/c1-${i}`, { a: bytes(100), b: bytes(200) }],
  ]);
  const files = await writeVolumeFiles(sanitized.volumes, objects, {
    dir: { uid: 0, gid: 0, mode: 0o700 },
    file: { uid: 0, gid: 0, mode: 0o600 },
  });
  if (files.written !== 6) throw new Error(`${id}: ${JSON.stringify(files)}`);
});
const checkpointed = performance.now();
await Deno.mkdir(`${root}/status`);
await mapConcurrent(each, 8, async (i) => {
  await atomicWrite(`${root}/status/${i}.json`, `{"id":"${i}"}\n`, { mode: 0o600 });
});
const recorded = performance.now();
const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
console.log(
  `${parents} parents: checkpoints ${seconds(checkpointed - started)}, records ${
    seconds(recorded - checkpointed)
  }; load average ${(await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ")}`,
);
await Deno.remove(root, { recursive: true });
