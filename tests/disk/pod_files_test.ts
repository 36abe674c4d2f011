/** Secret, configmap and downward-API files of checkpoints, on a real file system, as root. */
import assert, { deepStrictEqual as assertEquals } from "node:assert/strict";
import type { Pod } from "../../lib/core/pod.ts";
import {
  type FileAccess,
  type StoredAccess,
  storedAccess,
} from "../../lib/core/checkpoint_layout.ts";
import { sanitizeCheckpoint, type VolumeFiles } from "../../lib/core/sanitize.ts";
import {
  copyVolumeFiles,
  type ObjectData,
  objectKey,
  removeStaleVolumeDirs,
  StoredFilesTooLarge,
  writeVolumeFiles,
} from "../../lib/disk/pod_files.ts";
import { TRUSTED_AGE_MS, VerifiedFiles } from "../../lib/disk/verified_files.ts";
import { withTempDir } from "../helpers/temp_dir.ts";
import { untilSettled } from "../helpers/until.ts";
import { type Entry, tree } from "../helpers/tree.ts";

/** A pod with an fsGroup: the agent's files and directories, in its group. */
const OWNER: StoredAccess = {
  dir: { uid: 0, gid: 5678, mode: 0o750 },
  file: { uid: 0, gid: 5678, mode: 0o640 },
};
const bytes = (text: string) => new TextEncoder().encode(text);

function secretData(data: Record<string, string>): Record<string, Uint8Array> {
  return Object.fromEntries(Object.entries(data).map(([k, v]) => [k, bytes(v)]));
}

/** Fetched objects by key; text data, or "absent". */
function fetched(objects: Record<string, Record<string, string> | "absent">): ObjectData {
  return new Map(
    Object.entries(objects).map((
      [key, data],
    ) => [key, data === "absent" ? data : secretData(data)]),
  );
}

const file = (content: string, access: FileAccess = OWNER.file): Entry => ({
  type: "file",
  ...access,
  content,
});
const dir = (access: FileAccess = OWNER.dir): Entry => ({ type: "dir", ...access });
/** A pod whose containers run as one user, without an fsGroup. */
const OTHER: StoredAccess = {
  dir: { uid: 0, gid: 0, mode: 0o755 },
  file: { uid: 4321, gid: 0, mode: 0o600 },
};
/** The agent's own directories above a volume's. */
const ROOT = { uid: 0, gid: 0, mode: 0o700 };

/** A volume of files stored below `root` (the secrets or configmaps dir). */
function volume(
  root: string,
  name: string,
  dirPath: string,
  sources: VolumeFiles["sources"],
): VolumeFiles {
  return { volume: name, root, dir: dirPath, sources };
}

Deno.test("the kube-apiserver fixture's volumes, end to end from the sanitizer", async () => {
  await withTempDir(async (root) => {
    const parent: Pod = JSON.parse(
      await Deno.readTextFile(new URL("../fixtures/kube-apiserver-pod.json", import.meta.url)),
    );
    const { volumes } = sanitizeCheckpoint(parent, {
      secretsDir: `${root}/secrets`,
      configmapsDir: `${root}/configmaps`,
      nodeName: "cp-1",
    });
    const owner = storedAccess(parent, 0);
    assert(!("error" in owner));
    const objects: ObjectData = new Map([
      [objectKey("secret", "kube-apiserver"), secretData({ "tls.crt": "CRT", "tls.key": "KEY" })],
      [objectKey("configMap", "apiserver-audit"), secretData({ "policy.yaml": "rules: []" })],
      [objectKey("configMap", "kube-root-ca.crt"), secretData({ "ca.crt": "CA" })],
    ]);

    const summary = await writeVolumeFiles(volumes, objects, owner);
    assertEquals(summary, {
      written: 5,
      unchanged: 0,
      trusted: 0,
      removed: 0,
      bytesWritten: 28,
      skipped: [],
    });
    const o = owner;
    assertEquals(await tree(root), {
      "configmaps": dir(ROOT),
      "configmaps/kube-system": dir(ROOT),
      "configmaps/kube-system/kube-apiserver-7x2kq": dir(ROOT),
      "configmaps/kube-system/kube-apiserver-7x2kq/_volumes": dir(ROOT),
      "configmaps/kube-system/kube-apiserver-7x2kq/_volumes/audit-policy": dir(o.dir),
      "configmaps/kube-system/kube-apiserver-7x2kq/_volumes/audit-policy/audit": dir(o.dir),
      "configmaps/kube-system/kube-apiserver-7x2kq/_volumes/audit-policy/audit/policy.yaml": file(
        "rules: []",
        o.file,
      ),
      "secrets": dir(ROOT),
      "secrets/kube-system": dir(ROOT),
      "secrets/kube-system/kube-apiserver-7x2kq": dir(ROOT),
      "secrets/kube-system/kube-apiserver-7x2kq/_volumes": dir(ROOT),
      "secrets/kube-system/kube-apiserver-7x2kq/_volumes/kube-api-access-5xq8n": dir(o.dir),
      "secrets/kube-system/kube-apiserver-7x2kq/_volumes/kube-api-access-5xq8n/ca.crt": file(
        "CA",
        o.file,
      ),
      "secrets/kube-system/kube-apiserver-7x2kq/_volumes/kube-api-access-5xq8n/namespace": file(
        "kube-system",
        o.file,
      ),
      "secrets/kube-system/kube-apiserver-7x2kq/kube-apiserver": dir(o.dir),
      "secrets/kube-system/kube-apiserver-7x2kq/kube-apiserver/tls.crt": file("CRT", o.file),
      "secrets/kube-system/kube-apiserver-7x2kq/kube-apiserver/tls.key": file("KEY", o.file),
    });

    // Nothing changed: nothing written.
    const before = await tree(root);
    assertEquals(await writeVolumeFiles(volumes, objects, owner), {
      written: 0,
      unchanged: 5,
      trusted: 0,
      removed: 0,
      bytesWritten: 0,
      skipped: [],
    });
    assertEquals(await tree(root), before);
  });
});

Deno.test("stored files unchanged by stat are not read; touched ones and new data are", async () => {
  await withTempDir(async (root) => {
    const v = [
      volume(root, "certs", `${root}/v`, [{ kind: "secret", name: "s", optional: false }]),
    ];
    const data = (d: Record<string, string>): ObjectData => new Map([["secret/s", secretData(d)]]);
    // A clock ahead of the files' ctimes: what was written is trusted at once.
    const verified = new VerifiedFiles(() => Date.now() + 2 * TRUSTED_AGE_MS);
    const summary = (written: number, trusted: number, bytesWritten: number) => ({
      written,
      unchanged: 2 - written,
      trusted,
      removed: 0,
      bytesWritten,
      skipped: [],
    });
    const both = data({ a: "1111", b: "2222" });
    assertEquals(await writeVolumeFiles(v, both, OWNER, { verified }), summary(2, 0, 8));
    assertEquals(await writeVolumeFiles(v, both, OWNER, { verified }), summary(0, 2, 0));

    // Changed by hand, same size, mtime set back: its ctime tells, and it is put back.
    const a = `${root}/v/a`;
    await untilSettled(a);
    const { mtime } = await Deno.lstat(a);
    await Deno.writeTextFile(a, "XXXX");
    await Deno.utime(a, mtime!, mtime!);
    assertEquals(await writeVolumeFiles(v, both, OWNER, { verified }), summary(1, 1, 4));
    assertEquals(await Deno.readTextFile(a), "1111");

    await Deno.remove(`${root}/v/b`);
    assertEquals(await writeVolumeFiles(v, both, OWNER, { verified }), summary(1, 1, 4));
    assertEquals(await Deno.readTextFile(`${root}/v/b`), "2222");

    // New data of the object: that file is rewritten, whatever its stat.
    const next = data({ a: "1111", b: "3333" });
    assertEquals(await writeVolumeFiles(v, next, OWNER, { verified }), summary(1, 1, 4));
    assertEquals(await Deno.readTextFile(`${root}/v/b`), "3333");

    // Another owner: the files are checked again, and repaired.
    const other = OTHER;
    assertEquals(await writeVolumeFiles(v, next, other, { verified }), summary(2, 0, 8));
    assertEquals(await writeVolumeFiles(v, next, other, { verified }), summary(0, 2, 0));
  });
});

Deno.test("a key deleted from a secret is removed; a changed one rewritten", async () => {
  await withTempDir(async (root) => {
    const v = [
      volume(root, "certs", `${root}/v`, [{ kind: "secret", name: "s", optional: false }]),
    ];
    const data = (d: Record<string, string>): ObjectData => new Map([["secret/s", secretData(d)]]);
    await writeVolumeFiles(v, data({ a: "1", b: "2", c: "3" }), OWNER);
    const summary = await writeVolumeFiles(v, data({ a: "1", c: "33" }), OWNER);
    assertEquals(summary, {
      written: 1,
      unchanged: 1,
      trusted: 0,
      removed: 1,
      bytesWritten: 2,
      skipped: [],
    });
    assertEquals(await tree(`${root}/v`), { a: file("1"), c: file("33") });
  });
});

Deno.test("an absent optional source adds nothing; an absent required one skips the volume", async () => {
  await withTempDir(async (root) => {
    const sources: VolumeFiles["sources"] = [
      { kind: "secret", name: "req", optional: false },
      { kind: "configMap", name: "opt", optional: true },
    ];
    const v = [volume(root, "mixed", `${root}/v`, sources)];
    await writeVolumeFiles(
      v,
      fetched({ "secret/req": { k: "v" }, "configMap/opt": "absent" }),
      OWNER,
    );
    assertEquals(await tree(`${root}/v`), { k: file("v") });

    // The optional one appears, then goes away again: its file follows.
    await writeVolumeFiles(
      v,
      fetched({ "secret/req": { k: "v" }, "configMap/opt": { o: "1" } }),
      OWNER,
    );
    assertEquals(await tree(`${root}/v`), { k: file("v"), o: file("1") });
    await writeVolumeFiles(
      v,
      fetched({ "secret/req": { k: "v" }, "configMap/opt": "absent" }),
      OWNER,
    );
    assertEquals(await tree(`${root}/v`), { k: file("v") });

    // The required one is deleted in the API: the volume is left as it is.
    const summary = await writeVolumeFiles(
      v,
      fetched({ "secret/req": "absent", "configMap/opt": "absent" }),
      OWNER,
    );
    assertEquals(summary.skipped, [{
      volume: "mixed",
      reason: "secret/req does not exist and is not optional",
    }]);
    assertEquals(await tree(`${root}/v`), { k: file("v") });
  });
});

Deno.test("a failed fetch keeps every file of the volume, even with other sources fetched", async () => {
  await withTempDir(async (root) => {
    const v = [
      volume(root, "projected", `${root}/p`, [
        { kind: "secret", name: "a", optional: false },
        { kind: "configMap", name: "b", optional: true },
        { kind: "literal", path: "namespace", content: "ns" },
      ]),
      volume(root, "other", `${root}/o`, [{ kind: "secret", name: "c", optional: false }]),
    ];
    const all: ObjectData = new Map([
      ["secret/a", secretData({ a: "1" })],
      ["configMap/b", secretData({ b: "2" })],
      ["secret/c", secretData({ c: "3" })],
    ]);
    await writeVolumeFiles(v, all, OWNER);
    const before = await tree(root);

    // configMap/b's fetch failed; secret/a now lacks its key; secret/c changed.
    const partial: ObjectData = new Map([["secret/a", secretData({})], [
      "secret/c",
      secretData({ c: "4" }),
    ]]);
    const summary = await writeVolumeFiles(v, partial, OWNER);
    assertEquals(summary.skipped, [{
      volume: "projected",
      reason: "configMap/b could not be fetched; files kept as they are",
    }]);
    assertEquals(summary.written, 1);
    assertEquals(
      await tree(`${root}/p`),
      Object.fromEntries(
        Object.entries(before).filter(([k]) => k.startsWith("p/")).map(([k, e]) => [k.slice(2), e]),
      ),
    );
    assertEquals((await tree(`${root}/o`)).c, file("4"));
  });
});

Deno.test("items: each key at its path, missing keys as the kubelet treats them", async () => {
  await withTempDir(async (root) => {
    const items = [{ key: "policy", path: "audit/policy.yaml" }, {
      key: "extra",
      path: "deep/er/x",
    }];
    const required = [
      volume(root, "req", `${root}/r`, [{ kind: "configMap", name: "cm", optional: false, items }]),
    ];
    const optional = [
      volume(root, "opt", `${root}/o`, [{ kind: "configMap", name: "cm", optional: true, items }]),
    ];
    const objects: ObjectData = new Map([[
      "configMap/cm",
      secretData({ policy: "p", unused: "u" }),
    ]]);

    const r = await writeVolumeFiles(required, objects, OWNER);
    assertEquals(r.skipped, [{ volume: "req", reason: "configMap/cm has no key extra" }]);
    await assertMissing(`${root}/r`);

    assertEquals((await writeVolumeFiles(optional, objects, OWNER)).skipped, []);
    assertEquals(await tree(`${root}/o`), { audit: dir(), "audit/policy.yaml": file("p") });

    // The key comes; then an item is dropped from the pod: its file and now-empty dirs go.
    objects.set("configMap/cm", secretData({ policy: "p", extra: "e" }));
    await writeVolumeFiles(optional, objects, OWNER);
    assertEquals(Object.keys(await tree(`${root}/o`)), [
      "audit",
      "audit/policy.yaml",
      "deep",
      "deep/er",
      "deep/er/x",
    ]);
    const fewer = [
      volume(root, "opt", `${root}/o`, [{
        kind: "configMap",
        name: "cm",
        optional: true,
        items: items.slice(0, 1),
      }]),
    ];
    assertEquals((await writeVolumeFiles(fewer, objects, OWNER)).removed, 1);
    assertEquals(Object.keys(await tree(`${root}/o`)), ["audit", "audit/policy.yaml"]);
  });
});

async function assertMissing(path: string) {
  try {
    await Deno.lstat(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return;
    throw e;
  }
  throw new Error(`${path} exists`);
}

Deno.test("paths that could leave the volume directory are refused, the rest written", async () => {
  await withTempDir(async (root) => {
    const bad = [
      "../escape",
      "a/../../escape",
      "/etc/escape",
      "a//b",
      "a/",
      "",
      ".",
      "./x",
      "..data",
      `.x.ckpt-tmp-1`,
      "nul\0byte",
      "x".repeat(256),
    ];
    const v = [volume(root, "v", `${root}/vol/v`, [
      {
        kind: "configMap",
        name: "cm",
        optional: false,
        items: bad.map((path) => ({ key: "k", path })),
      },
      // Keys become file names too, and are checked the same way.
      { kind: "secret", name: "s", optional: false },
      { kind: "literal", path: "ok", content: "fine" },
      { kind: "literal", path: ".dotfile", content: "keys may start with a dot" },
    ])];
    const objects: ObjectData = new Map([
      ["configMap/cm", secretData({ k: "bad" })],
      ["secret/s", secretData({ "../../secret-escape": "bad", "good-key": "g" })],
    ]);
    const summary = await writeVolumeFiles(v, objects, OWNER);
    assertEquals(summary.skipped.map((s) => s.reason.replace(/^file .* refused: /, "")), [
      "path segment ..",
      "path segment ..",
      "absolute path",
      "empty path segment",
      "empty path segment",
      "empty path",
      "path segment .",
      "path segment .",
      "path segment ..data",
      "name of a temp file of ours",
      "NUL in path",
      "name too long",
      "path segment ..",
    ]);
    assertEquals(await tree(root), {
      vol: dir(ROOT),
      "vol/v": dir(),
      "vol/v/.dotfile": file("keys may start with a dot"),
      "vol/v/good-key": file("g"),
      "vol/v/ok": file("fine"),
    });
  });
});

Deno.test("a path cannot be both a file and a directory", async () => {
  await withTempDir(async (root) => {
    const v = [volume(root, "v", `${root}/v`, [
      { kind: "literal", path: "a", content: "file" },
      { kind: "literal", path: "a/b", content: "under a file" },
    ])];
    const summary = await writeVolumeFiles(v, new Map(), OWNER);
    assertEquals(summary.skipped, [{ volume: "v", reason: 'file "a/b" refused: a is a file' }]);
    assertEquals(await tree(`${root}/v`), { a: file("file") });

    // What was a file becomes a directory, and back.
    await writeVolumeFiles(
      [volume(root, "v", `${root}/v`, [{ kind: "literal", path: "a/b", content: "1" }])],
      new Map(),
      OWNER,
    );
    assertEquals(await tree(`${root}/v`), { a: dir(), "a/b": file("1") });
    await writeVolumeFiles(
      [volume(root, "v", `${root}/v`, [{ kind: "literal", path: "a", content: "2" }])],
      new Map(),
      OWNER,
    );
    assertEquals(await tree(`${root}/v`), { a: file("2") });
  });
});

Deno.test("symlinks planted in a volume are replaced, never followed", async () => {
  await withTempDir(async (root) => {
    await Deno.mkdir(`${root}/outside`);
    await Deno.writeTextFile(`${root}/outside/target`, "precious");
    await Deno.chmod(`${root}/outside/target`, 0o644);
    const v = [volume(root, "v", `${root}/v`, [
      { kind: "literal", path: "sub/file", content: "new" },
      { kind: "literal", path: "target", content: "new" },
    ])];
    await Deno.mkdir(`${root}/v`);
    // A container with the hostPath mounted read-write could do this.
    await Deno.symlink(`${root}/outside`, `${root}/v/sub`);
    await Deno.symlink(`${root}/outside/target`, `${root}/v/target`);
    await Deno.symlink(`${root}/outside`, `${root}/v/stray`);
    await writeVolumeFiles(v, new Map(), OWNER);
    assertEquals(await tree(`${root}/outside`), {
      target: { type: "file", mode: 0o644, uid: 0, gid: 0, content: "precious" },
    });
    assertEquals(await tree(`${root}/v`), {
      sub: dir(),
      "sub/file": file("new"),
      target: file("new"),
    });
  });
});

Deno.test("owner and modes are repaired; leftovers of a crash are removed", async () => {
  await withTempDir(async (root) => {
    const v = [volume(root, "v", `${root}/v`, [{ kind: "literal", path: "d/f", content: "x" }])];
    await writeVolumeFiles(v, new Map(), OWNER);
    await Deno.chmod(`${root}/v/d`, 0o755);
    await Deno.chown(`${root}/v`, 0, 0);
    await Deno.writeTextFile(`${root}/v/d/.f.ckpt-tmp-42`, "half written");

    // The pod now runs as one user, without an fsGroup: the files are its, the directories
    // the agent's.
    const summary = await writeVolumeFiles(v, new Map(), OTHER);
    assertEquals([summary.written, summary.removed], [1, 1]);
    assertEquals(await tree(`${root}/v`), { d: dir(OTHER.dir), "d/f": file("x", OTHER.file) });
    assertEquals((await Deno.stat(`${root}/v`)).mode! & 0o7777, OTHER.dir.mode);
  });
});

Deno.test("a volume directory that is not a plain absolute path is refused", async () => {
  await withTempDir(async (root) => {
    const literal = [{ kind: "literal" as const, path: "f", content: "x" }];
    const summary = await writeVolumeFiles(
      [
        volume(root, "a", `${root}/x/../../escape`, literal),
        volume(root, "b", "relative/dir", literal),
        volume(root, "c", `${root}/a//b`, literal),
      ],
      new Map(),
      OWNER,
    );
    assertEquals(summary.skipped.map((s) => s.volume), ["a", "b", "c"]);
    assertEquals(await tree(root), {});
  });
});

Deno.test("directories of volumes the pod no longer has are removed, current ones kept", async () => {
  await withTempDir(async (root) => {
    const pod = [`${root}/secrets/ns/pod`, `${root}/configmaps/ns/pod`];
    const literal = [{ kind: "literal" as const, path: "f", content: "x" }];
    const before = [
      volume(root, "old-secret", `${pod[0]}/old`, literal),
      volume(root, "kept", `${pod[0]}/kept`, literal),
      volume(root, "old-projected", `${pod[0]}/_volumes/gone`, literal),
      volume(root, "projected", `${pod[0]}/_volumes/api`, literal),
      volume(root, "cm", `${pod[1]}/cm`, literal),
    ];
    await writeVolumeFiles(before, new Map(), OWNER);
    await Deno.writeTextFile(`${pod[0]}/stray-file`, "x");
    // Another pod's directory is none of this pod's business.
    await writeVolumeFiles(
      [volume(root, "x", `${root}/secrets/ns/pod-2/x`, literal)],
      new Map(),
      OWNER,
    );

    const now = [before[1], before[3]];
    const dirs = { secretsDir: `${root}/secrets`, configmapsDir: `${root}/configmaps` };
    const id = { namespace: "ns", name: "pod" };
    assertEquals((await removeStaleVolumeDirs(dirs, id, 1, now)).sort(), [
      `${pod[1]}/cm`,
      `${pod[0]}/_volumes/gone`,
      `${pod[0]}/old`,
      `${pod[0]}/stray-file`,
    ]);
    assertEquals(Object.keys(await tree(`${root}/secrets`)), [
      "ns",
      "ns/pod",
      "ns/pod/_volumes",
      "ns/pod/_volumes/api",
      "ns/pod/_volumes/api/f",
      "ns/pod/kept",
      "ns/pod/kept/f",
      "ns/pod-2",
      "ns/pod-2/x",
      "ns/pod-2/x/f",
    ]);
    assertEquals(await removeStaleVolumeDirs(dirs, id, 1, now), []);
    assertEquals(await removeStaleVolumeDirs(dirs, { ...id, name: "absent" }, 1, now), []);
  });
});

Deno.test("copyVolumeFiles: another version's files, downward-API files rendered anew", async () => {
  await withTempDir(async (root) => {
    const from = `${root}/old`, to = `${root}/new`;
    const volumes = [
      volume(root, "tls", `${to}/tls`, [{ kind: "secret", name: "tls", optional: false }]),
      volume(root, "info", `${to}/_volumes/info`, [
        { kind: "configMap", name: "ca", optional: false },
        { kind: "literal", path: "name", content: "new-pod" },
      ]),
      volume(root, "gone", `${to}/gone`, [{ kind: "secret", name: "gone", optional: false }]),
    ];
    await Deno.mkdir(`${from}/tls/sub`, { recursive: true });
    await Deno.writeTextFile(`${from}/tls/tls.key`, "KEY");
    await Deno.writeTextFile(`${from}/tls/sub/ca.crt`, "CA");
    await Deno.symlink("/etc/passwd", `${from}/tls/link`);
    await Deno.writeTextFile(`${from}/tls/.tls.key.ckpt-tmp-0a1b`, "torn");
    await Deno.mkdir(`${from}/_volumes/info`, { recursive: true });
    await Deno.writeTextFile(`${from}/_volumes/info/ca.crt`, "CA");
    await Deno.writeTextFile(`${from}/_volumes/info/name`, "old-pod");
    // Left over in the new directory from an earlier try: not in the old version, so removed.
    await Deno.mkdir(`${to}/tls`, { recursive: true });
    await Deno.writeTextFile(`${to}/tls/stale`, "x");

    const summary = await copyVolumeFiles(volumes, (d) => d.replace(to, from), OWNER);
    assertEquals(summary.skipped, [{ volume: "gone", reason: `nothing to copy at ${from}/gone` }]);
    const copied = await tree(to);
    assertEquals(copied["tls/tls.key"], file("KEY"));
    assertEquals(copied["tls/sub/ca.crt"], file("CA"));
    assertEquals(copied["tls/sub"], dir());
    assertEquals(copied["_volumes/info/ca.crt"], file("CA"));
    assertEquals(copied["_volumes/info/name"], file("new-pod"));
    assertEquals(
      Object.keys(copied).filter((p) => /link|stale|ckpt-tmp|gone/.test(p)),
      [],
    );
    assertEquals(await Deno.readTextFile(`${from}/_volumes/info/name`), "old-pod");
  });
});

Deno.test("over maxBytes: nothing of the volumes is written, the files kept say why; under it, all", async () => {
  await withTempDir(async (root) => {
    const v = [
      volume(root, "a", `${root}/ns/pod/a`, [{ kind: "secret", name: "a", optional: false }]),
      volume(root, "b", `${root}/ns/pod/b`, [{ kind: "secret", name: "b", optional: false }]),
    ];
    const mib = (n: number) => new Uint8Array(n * 2 ** 20);
    const small: ObjectData = new Map([["secret/a", { k: bytes("1") }], [
      "secret/b",
      { k: bytes("2") },
    ]]);
    await writeVolumeFiles(v, small, OWNER, { maxBytes: 2 ** 20 });
    const before = await tree(root);
    const large: ObjectData = new Map([["secret/a", { k: mib(1) }], ["secret/b", { k: mib(2) }]]);
    await assert.rejects(
      () => writeVolumeFiles(v, large, OWNER, { maxBytes: 2 ** 21 }),
      (e: Error) =>
        e instanceof StoredFilesTooLarge &&
        e.message === "its stored files would take 3.0 MiB (volume b 2.0 MiB, volume a 1.0 MiB), " +
            "more than checkpointMaxSize (2.0 MiB): none of them is written",
    );
    assertEquals(await tree(root), before);
    assertEquals((await writeVolumeFiles(v, large, OWNER, { maxBytes: 3 * 2 ** 20 })).written, 2);
  });
});
