/**
 * The directory fsyncs test's child: under `dir`, `count` checkpoints' first versions and their
 * stored files written as a pass writes them (writeVersion, then writeVolumeFiles: two secrets
 * and a configmap of two keys each), one checkpoint after the other, each step said on standard
 * output once it returned; then `burst` fsyncs of one directory asked for at once, as the
 * writes of a pass's status records ask for them.
 */
import { checkpointPaths, versionsDir } from "../../lib/core/checkpoint_layout.ts";
import type { VolumeFiles } from "../../lib/core/sanitize.ts";
import { syncDir } from "../../lib/disk/atomic_write.ts";
import { renderManifest } from "../../lib/disk/manifests.ts";
import { type ObjectData, writeVolumeFiles } from "../../lib/disk/pod_files.ts";
import { writeVersion } from "../../lib/disk/versions.ts";
import { checkpoint, parent } from "../helpers/pods.ts";

const [dir, count, burst] = [Deno.args[0], Number(Deno.args[1]), Number(Deno.args[2])];
const trees = {
  staticPodDir: `${dir}/manifests`,
  inactiveDir: `${dir}/inactive`,
  secretsDir: `${dir}/secrets`,
  configmapsDir: `${dir}/configmaps`,
};
const say = (line: string) => Deno.stdout.writeSync(new TextEncoder().encode(`${line}\n`));
const bytes = (text: string) => new TextEncoder().encode(text);

for (let i = 0; i < count; i++) {
  const id = `kube-system/component-${i}`;
  const name = `component-${i}`;
  say(`begin ${id}`);
  await writeVersion(trees, id, 1, {
    origin: { madeAt: "2026-12-01T10:00:00Z", parent: parent(id) },
    manifest: renderManifest(checkpoint(id)),
  });
  say(`version ${versionsDir(trees, id)}`);
  const { secretsDir, configmapsDir } = checkpointPaths(trees, id);
  const volumes: VolumeFiles[] = [
    {
      volume: "a",
      root: trees.secretsDir,
      dir: `${secretsDir}/a`,
      sources: [{ kind: "secret", name: "a", optional: false }],
    },
    {
      volume: "b",
      root: trees.secretsDir,
      dir: `${secretsDir}/b`,
      sources: [{ kind: "secret", name: "b", optional: false }],
    },
    {
      volume: "c",
      root: trees.configmapsDir,
      dir: `${configmapsDir}/c`,
      sources: [{ kind: "configMap", name: "c", optional: false }],
    },
  ];
  const objects: ObjectData = new Map<string, Record<string, Uint8Array>>([
    ["secret/a", { key: bytes(`a ${name}`), crt: bytes("a") }],
    ["secret/b", { key: bytes(`b ${name}`), crt: bytes("b") }],
    ["configMap/c", { one: bytes(`c ${name}`), two: bytes("c") }],
  ]);
  const files = await writeVolumeFiles(volumes, objects, {
    dir: { uid: 0, gid: 1234, mode: 0o750 },
    file: { uid: 0, gid: 1234, mode: 0o640 },
  });
  say(`files ${files.written}`);
}

await Deno.mkdir(`${dir}/records`);
say("burst");
await Promise.all(Array.from({ length: burst }, () => syncDir(`${dir}/records`)));
say("burst done");
