/** Manifest directories on disk: what is read, what is written, and what is never touched. */
import { deepStrictEqual as assertEquals, ok as assert, rejects, throws } from "node:assert/strict";
import { basename } from "node:path";
import {
  checkpointPaths,
  type CheckpointTrees,
  manifestFileName,
  unambiguousManifestFileName,
} from "../../lib/core/checkpoint_layout.ts";
import { podId } from "../../lib/core/pod.ts";
import {
  activateCheckpoint,
  deactivateCheckpoint,
  ForeignManifestError,
  readManifestDir,
  removeCheckpoint,
  renderManifest,
  writeInactiveManifest,
} from "../../lib/disk/manifests.ts";
import { pathExists } from "../../lib/disk/dirs.ts";
import { checkpoint, pod } from "../helpers/pods.ts";
import { withTempDir } from "../helpers/temp_dir.ts";
import { type Tmpfs, TMPFS_UNAVAILABLE, withTmpfs } from "../helpers/tmpfs.ts";
import { tree } from "../helpers/tree.ts";

/** A static pod as kubeadm writes it: YAML over many lines, no checkpoint annotation. */
const KUBEADM_ETCD = `apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubeadm.kubernetes.io/etcd.advertise-client-urls: https://10.0.0.10:2379
  creationTimestamp: null
  labels:
    component: etcd
    tier: control-plane
  name: etcd
  namespace: kube-system
spec:
  containers:
  - command:
    - etcd
    - --data-dir=/var/lib/etcd
    image: registry.k8s.io/etcd:3.5.15-0
    name: etcd
  hostNetwork: true
status: {}
`;

function pathsIn(dir: string): CheckpointTrees {
  return {
    staticPodDir: `${dir}/manifests`,
    inactiveDir: `${dir}/inactive`,
    secretsDir: `${dir}/secrets`,
    configmapsDir: `${dir}/configmaps`,
  };
}

/** Every file under `dir` with its text, sorted, to prove that something was left alone. */
async function snapshotFiles(dir: string): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  const entries: Deno.DirEntry[] = [];
  for await (const entry of Deno.readDir(dir)) entries.push(entry);
  entries.sort((a, b) => a.name < b.name ? -1 : 1);
  for (const entry of entries) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory) {
      for (const [p, c] of await snapshotFiles(path)) files.set(p, c);
    } else if (entry.isFile) {
      files.set(path, await Deno.readTextFile(path));
    }
  }
  return files;
}

async function mode(path: string): Promise<number> {
  return ((await Deno.stat(path)).mode ?? 0) & 0o7777;
}

/** `fn` with one of the manifest paths on a tmpfs of its own, the others on the temp dir's. */
function withOneOnTmpfs(
  key: keyof CheckpointTrees,
  fn: (paths: CheckpointTrees, fs: Tmpfs) => Promise<void>,
): Promise<void> {
  return withTempDir((dir) =>
    withTmpfs(1 << 20, (fs) => fn({ ...pathsIn(dir), [key]: fs.path(basename(key)) }, fs))
  );
}

async function inode(path: string): Promise<string> {
  const info = await Deno.stat(path);
  return `${info.dev}:${info.ino}`;
}

Deno.test("reads every non-dot file as the kubelet does: JSON, YAML, foreign, garbage", async () => {
  await withTempDir(async (dir) => {
    const ours = checkpoint("kube-system/kube-apiserver");
    await Deno.writeTextFile(`${dir}/kube-system-kube-apiserver.json`, renderManifest(ours));
    await Deno.writeTextFile(`${dir}/etcd.yaml`, KUBEADM_ETCD);
    // Named like ours, but the pod inside has another id: foreign.
    await Deno.writeTextFile(`${dir}/kube-system-other.json`, JSON.stringify(pod("kube-system/x")));
    // No extension, JSON inside: the kubelet loads it, so do we.
    await Deno.writeTextFile(`${dir}/scheduler`, JSON.stringify(checkpoint("kube-system/sched")));
    // The unambiguous name is a name of ours too.
    await Deno.writeTextFile(
      `${dir}/kube-system_sched2.json`,
      renderManifest(checkpoint("kube-system/sched2")),
    );
    await Deno.symlink(`${dir}/etcd.yaml`, `${dir}/etcd-link.yaml`);
    // Ignored: dot-files (our temp files among them) and directories.
    await Deno.writeTextFile(`${dir}/.hidden.json`, JSON.stringify(pod("a/hidden")));
    await Deno.writeTextFile(`${dir}/.a-b.json.ckpt-tmp-1`, JSON.stringify(pod("a/b")));
    await Deno.mkdir(`${dir}/subdir`);
    await Deno.writeTextFile(`${dir}/subdir/a-c.json`, JSON.stringify(pod("a/c")));
    // Problems, reported by file.
    await Deno.writeTextFile(`${dir}/README`, "Static pods live here.\n");
    await Deno.writeTextFile(`${dir}/broken.json`, '{"metadata": ');
    await Deno.writeTextFile(`${dir}/nameless.yaml`, "kind: Pod\nmetadata:\n  namespace: a\n");
    await Deno.writeTextFile(`${dir}/two.yaml`, `${KUBEADM_ETCD}---\n${KUBEADM_ETCD}`);
    await Deno.writeFile(`${dir}/binary`, new Uint8Array([0xff, 0xfe, 0x00, 0x80]));
    await Deno.writeFile(`${dir}/huge.json`, new Uint8Array(1024 * 1024 + 1));
    const before = await snapshotFiles(dir);

    const read = await readManifestDir(dir);
    assertEquals(
      read.manifests.map((m) => [m.file.slice(dir.length + 1), podId(m.pod), m.ours]),
      [
        ["etcd-link.yaml", "kube-system/etcd", false],
        ["etcd.yaml", "kube-system/etcd", false],
        ["kube-system-kube-apiserver.json", "kube-system/kube-apiserver", true],
        ["kube-system-other.json", "kube-system/x", false],
        ["kube-system_sched2.json", "kube-system/sched2", true],
        ["scheduler", "kube-system/sched", false],
      ],
    );
    assertEquals(read.pods, read.manifests.map((m) => m.pod));
    assertEquals(read.manifests[2].pod, ours);
    assertEquals(read.manifests[1].pod.metadata.labels, {
      component: "etcd",
      tier: "control-plane",
    });
    assertEquals(
      read.problems.map((p) => [p.file.slice(dir.length + 1), p.problem.replace(/:.*/s, "")]),
      [
        ["README", "not a pod"],
        ["binary", "not JSON or YAML"],
        ["broken.json", "not JSON or YAML"],
        ["huge.json", "larger than 1048576 bytes; not read"],
        ["nameless.yaml", "not a pod"],
        ["two.yaml", "not JSON or YAML"],
      ],
    );
    assertEquals(read.problems[0].problem, "not a pod: document: expected object, received string");
    assertEquals(read.problems[4].problem, "not a pod: metadata.name: missing (string)");
    for (const { problem } of read.problems) assert(!problem.includes("\n"), problem);
    assertEquals(await snapshotFiles(dir), before);
  });
});

Deno.test("a missing directory is empty", async () => {
  await withTempDir(async (dir) => {
    assertEquals(await readManifestDir(`${dir}/absent`), { pods: [], manifests: [], problems: [] });
  });
});

Deno.test("write, activate, deactivate: outcomes, modes, and only-if-different", async () => {
  await withTempDir(async (dir) => {
    const paths = pathsIn(dir);
    const id = "kube-system/kube-apiserver";
    const file = manifestFileName(id);
    const p = checkpointPaths(paths, id, file);
    assertEquals(p, {
      inactiveManifest: `${dir}/inactive/kube-system-kube-apiserver.json`,
      activeManifest: `${dir}/manifests/kube-system-kube-apiserver.json`,
      secretsDir: `${dir}/secrets/kube-system/kube-apiserver`,
      configmapsDir: `${dir}/configmaps/kube-system/kube-apiserver`,
    });
    assertEquals(await activateCheckpoint(paths, id, file), "no-inactive-manifest");

    const manifest = checkpoint(id);
    assertEquals(await writeInactiveManifest(paths, manifest, file), "written");
    assertEquals(
      await Deno.readTextFile(p.inactiveManifest),
      `${JSON.stringify(manifest, null, 2)}\n`,
    );
    assertEquals(await mode(p.inactiveManifest), 0o600);
    assertEquals(await mode(paths.inactiveDir), 0o700);
    assertEquals(await writeInactiveManifest(paths, manifest, file), "unchanged");

    assertEquals(await activateCheckpoint(paths, id, file), "written");
    assertEquals(await Deno.readTextFile(p.activeManifest), renderManifest(manifest));
    assertEquals(await mode(p.activeManifest), 0o600);
    // One file system: the active manifest is the inactive one, linked.
    assertEquals(await inode(p.activeManifest), await inode(p.inactiveManifest));
    assertEquals(await activateCheckpoint(paths, id, file), "unchanged");

    // A changed parent: the inactive manifest is replaced, the active one keeps what it was
    // linked with, and follows on activation.
    const changed = { ...manifest, spec: { containers: [{ name: "main", image: "new" }] } };
    assertEquals(await writeInactiveManifest(paths, changed, file), "written");
    assertEquals(await Deno.readTextFile(p.activeManifest), renderManifest(manifest));
    assertEquals(await activateCheckpoint(paths, id, file), "written");
    assertEquals(await Deno.readTextFile(p.activeManifest), renderManifest(changed));
    assertEquals(await inode(p.activeManifest), await inode(p.inactiveManifest));

    assertEquals(await deactivateCheckpoint(paths, id), "removed");
    assertEquals(await deactivateCheckpoint(paths, id), "absent");
    assertEquals(await Deno.readTextFile(p.inactiveManifest), renderManifest(changed));
    // No temp file left behind in either directory.
    assertEquals([...(await snapshotFiles(dir)).keys()], [p.inactiveManifest]);
  });
});

Deno.test("activation leaves an equal copy alone and replaces one that differs in mode", async () => {
  await withTempDir(async (dir) => {
    const paths = pathsIn(dir);
    const id = "a/b", file = manifestFileName(id);
    const p = checkpointPaths(paths, id, file);
    await writeInactiveManifest(paths, checkpoint(id), file);
    await Deno.mkdir(paths.staticPodDir);
    await Deno.copyFile(p.inactiveManifest, p.activeManifest);
    await Deno.chmod(p.activeManifest, 0o600);
    const copy = await inode(p.activeManifest);
    assertEquals(await activateCheckpoint(paths, id, file), "unchanged");
    assertEquals(await inode(p.activeManifest), copy);
    await Deno.chmod(p.activeManifest, 0o644);
    assertEquals(await activateCheckpoint(paths, id, file), "written");
    assertEquals(await inode(p.activeManifest), await inode(p.inactiveManifest));
    assertEquals(await mode(p.activeManifest), 0o600);
  });
});

Deno.test("activation that fails between link and rename leaves no temp link", async () => {
  await withTempDir(async (dir) => {
    const paths = pathsIn(dir);
    const id = "a/b", file = manifestFileName(id);
    const p = checkpointPaths(paths, id, file);
    await writeInactiveManifest(paths, checkpoint(id), file);
    // Something made the active path a non-empty directory: the rename over it fails.
    await Deno.mkdir(`${p.activeManifest}/x`, { recursive: true });
    await rejects(activateCheckpoint(paths, id, file));
    assertEquals(
      [...(await snapshotFiles(dir)).keys()].filter((f) => f.includes(".ckpt-tmp-")),
      [],
    );
    assertEquals(Object.keys(await tree(paths.staticPodDir)), [file, `${file}/x`]);
  });
});

Deno.test(
  "across file systems activation copies",
  { ignore: TMPFS_UNAVAILABLE !== undefined },
  async () => {
    await withOneOnTmpfs("staticPodDir", async (paths) => {
      const id = "a/b", file = manifestFileName(id);
      const p = checkpointPaths(paths, id, file);
      await writeInactiveManifest(paths, checkpoint(id), file);
      assertEquals(await activateCheckpoint(paths, id, file), "written");
      assertEquals(await Deno.readTextFile(p.activeManifest), renderManifest(checkpoint(id)));
      assertEquals(await mode(p.activeManifest), 0o600);
      assert(
        (await Deno.stat(p.activeManifest)).dev !== (await Deno.stat(p.inactiveManifest)).dev,
      );
      assertEquals(await activateCheckpoint(paths, id, file), "unchanged");
      assertEquals(Object.keys(await tree(paths.staticPodDir)), [file]);
    });
  },
);

Deno.test("an existing static-pod directory keeps its mode", async () => {
  await withTempDir(async (dir) => {
    const paths = pathsIn(dir);
    await Deno.mkdir(paths.staticPodDir, { mode: 0o755 });
    await Deno.chmod(paths.staticPodDir, 0o755);
    await writeInactiveManifest(paths, checkpoint("a/b"), "a-b.json");
    assertEquals(await activateCheckpoint(paths, "a/b", "a-b.json"), "written");
    assertEquals(await mode(paths.staticPodDir), 0o755);
  });
});

Deno.test("a checkpoint under its unambiguous name: written, activated, withdrawn, removed", async () => {
  await withTempDir(async (dir) => {
    const paths = pathsIn(dir);
    const id = "kube-system/x", other = "kube/system-x";
    const file = unambiguousManifestFileName(id);
    assertEquals(file, "kube-system_x.json");
    // The other id holds bootkube's name in both directories: never touched.
    await writeInactiveManifest(paths, checkpoint(other), manifestFileName(other));
    await activateCheckpoint(paths, other, manifestFileName(other));
    const p = checkpointPaths(paths, id, file);
    assertEquals([p.inactiveManifest, p.activeManifest], [
      `${dir}/inactive/kube-system_x.json`,
      `${dir}/manifests/kube-system_x.json`,
    ]);
    assertEquals(await writeInactiveManifest(paths, checkpoint(id), file), "written");
    assertEquals(await activateCheckpoint(paths, id, file), "written");
    const theirs = await snapshotFiles(dir);
    for (const f of [p.inactiveManifest, p.activeManifest]) theirs.delete(f);
    assertEquals(await deactivateCheckpoint(paths, id), "removed");
    assertEquals(await removeCheckpoint(paths, id), [p.inactiveManifest]);
    assertEquals(await snapshotFiles(dir), theirs);
    assertEquals(
      [...theirs.keys()],
      [`${dir}/inactive/kube-system-x.json`, `${dir}/manifests/kube-system-x.json`],
    );
    assertEquals(JSON.parse(theirs.get(`${dir}/manifests/kube-system-x.json`)!), checkpoint(other));
  });
});

Deno.test("withdrawal deletes the checkpoint under either name, but what it is told to keep", async () => {
  await withTempDir(async (dir) => {
    const paths = pathsIn(dir);
    const id = "kube-system/x";
    await Deno.mkdir(paths.staticPodDir);
    for (const name of ["kube-system-x.json", "kube-system_x.json"]) {
      await Deno.writeTextFile(`${paths.staticPodDir}/${name}`, renderManifest(checkpoint(id)));
    }
    assertEquals(await deactivateCheckpoint(paths, id, "kube-system_x.json"), "removed");
    assertEquals(Object.keys(await tree(paths.staticPodDir)), ["kube-system_x.json"]);
    assertEquals(await deactivateCheckpoint(paths, id), "removed");
    // Files at its names that hold anything else are not its own: they stay.
    await Deno.writeTextFile(`${paths.staticPodDir}/kube-system-x.json`, KUBEADM_ETCD);
    await Deno.writeTextFile(`${paths.staticPodDir}/kube-system_x.json`, "not a pod {");
    const before = await snapshotFiles(dir);
    assertEquals(await deactivateCheckpoint(paths, id), "absent");
    assertEquals(await removeCheckpoint(paths, id), []);
    assertEquals(await snapshotFiles(dir), before);
  });
});

Deno.test("writes refuse a file at their name that holds anything else", async () => {
  await withTempDir(async (dir) => {
    const paths = pathsIn(dir);
    const id = "a/b", file = manifestFileName(id);
    await Deno.mkdir(paths.inactiveDir);
    await Deno.writeTextFile(`${paths.inactiveDir}/${file}`, JSON.stringify(checkpoint("a/c")));
    await rejects(writeInactiveManifest(paths, checkpoint(id), file), ForeignManifestError);
    await Deno.writeTextFile(`${paths.inactiveDir}/a_b.json`, renderManifest(checkpoint(id)));
    await Deno.mkdir(paths.staticPodDir);
    await Deno.writeTextFile(`${paths.staticPodDir}/a_b.json`, KUBEADM_ETCD);
    await rejects(activateCheckpoint(paths, id, "a_b.json"), ForeignManifestError);
    assertEquals(await Deno.readTextFile(`${paths.staticPodDir}/a_b.json`), KUBEADM_ETCD);
  });
});

Deno.test("remove deletes the active manifest, then the inactive one, the pod's files last", async () => {
  await withTempDir(async (dir) => {
    const paths = pathsIn(dir);
    const id = "kube-system/kube-apiserver", file = manifestFileName(id);
    const p = checkpointPaths(paths, id, file);
    await writeInactiveManifest(paths, checkpoint(id), file);
    await activateCheckpoint(paths, id, file);
    await Deno.mkdir(`${p.secretsDir}/tls`, { recursive: true });
    await Deno.writeTextFile(`${p.secretsDir}/tls/tls.key`, "key");
    await Deno.mkdir(p.configmapsDir, { recursive: true });
    // Neighbours that must survive: another pod's files, foreign manifests.
    const neighbour = "kube-system/kube-apiserver-2";
    await writeInactiveManifest(paths, checkpoint(neighbour), manifestFileName(neighbour));
    await Deno.mkdir(`${paths.secretsDir}/kube-system/kube-apiserver-2`);
    await Deno.writeTextFile(`${paths.staticPodDir}/kube-apiserver.yaml`, KUBEADM_ETCD);
    await Deno.writeTextFile(`${paths.staticPodDir}/kube-system-kube-apiserver.yaml`, "x");
    // The configmaps' namespace directory held only this pod's files: it goes too. The
    // secrets' one still holds the neighbour's, and stays.
    const configmapsNamespace = `${paths.configmapsDir}/kube-system`;
    const untouched = [...(await snapshotFiles(dir))].filter(([f]) =>
      ![p.inactiveManifest, p.activeManifest, configmapsNamespace].includes(f) &&
      !f.startsWith(p.secretsDir) && !f.startsWith(`${configmapsNamespace}/`)
    );

    assertEquals(await removeCheckpoint(paths, id), [
      p.activeManifest,
      p.inactiveManifest,
      p.secretsDir,
      p.configmapsDir,
      configmapsNamespace,
    ]);
    assert((await Deno.stat(paths.configmapsDir)).isDirectory);
    assertEquals([...await snapshotFiles(dir)], untouched);
    assert((await Deno.stat(`${paths.secretsDir}/kube-system/kube-apiserver-2`)).isDirectory);
    assertEquals(await removeCheckpoint(paths, id), []);
  });
});

Deno.test(
  "a failed step of a removal never leaves a manifest without its files",
  { ignore: TMPFS_UNAVAILABLE !== undefined },
  async () => {
    await withOneOnTmpfs("inactiveDir", async (paths, fs) => {
      const id = "a/b", file = manifestFileName(id);
      const p = checkpointPaths(paths, id, file);
      await writeInactiveManifest(paths, checkpoint(id), file);
      await activateCheckpoint(paths, id, file);
      await Deno.mkdir(`${p.secretsDir}/tls`, { recursive: true });
      await Deno.writeTextFile(`${p.secretsDir}/tls/tls.key`, "key");
      // The inactive manifest cannot be deleted: its file system turned read-only.
      await fs.readOnly(true);
      await rejects(removeCheckpoint(paths, id), /Read-only file system/);
      assertEquals(await pathExists(p.activeManifest), false, "the copy is withdrawn first");
      assertEquals(await Deno.readTextFile(p.inactiveManifest), renderManifest(checkpoint(id)));
      assertEquals(await Deno.readTextFile(`${p.secretsDir}/tls/tls.key`), "key");
    });
  },
);

Deno.test("ids that are not safe file names are refused before any path is built", () => {
  const paths = pathsIn("/nonexistent");
  for (const id of ["a/b/c", "../x", "a/..", "Kube/x", "a/", "/b", "a/b c"]) {
    throws(() => checkpointPaths(paths, id), /not a valid checkpoint id/, id);
  }
  // Only the id's own two names.
  throws(() => checkpointPaths(paths, "a/b", "a-c.json"), /not a name of the manifest of a\/b/);
  throws(() => checkpointPaths(paths, "a/b", "../a-b.json"), /not a name of the manifest/);
});

Deno.test("writes refuse a pod with an unsafe id", async () => {
  await withTempDir(async (dir) => {
    await rejects(
      writeInactiveManifest(pathsIn(dir), pod("a/../../etc"), "a-../../etc.json"),
      /not a valid checkpoint id/,
    );
    await rejects(removeCheckpoint(pathsIn(dir), "a/.."), /not a valid checkpoint id/);
    await rejects(deactivateCheckpoint(pathsIn(dir), "a/.."), /not a valid checkpoint id/);
    assertEquals([...await snapshotFiles(dir)], []);
  });
});
