/**
 * The agent's trees against links planted in them (docs/design.md#no-links): by a container
 * racing the agent in its own volume, as its pod's user, while writes and prunes run; by the
 * same user in a tree an older agent had given it; and anywhere in the trees between passes.
 * Nothing outside the trees may change, whatever is planted.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import {
  type CheckpointTrees,
  type StoredAccess,
  versionsDir,
} from "../../lib/core/checkpoint_layout.ts";
import type { VolumeFiles } from "../../lib/core/sanitize.ts";
import { removeCheckpoint } from "../../lib/disk/manifests.ts";
import {
  type ObjectData,
  removeStaleVolumeDirs,
  writeVolumeFiles,
} from "../../lib/disk/pod_files.ts";
import { pruneVersions, readStoredVersions, writeVersion } from "../../lib/disk/versions.ts";
import { AgentStores } from "../../lib/store/agent_stores.ts";
import { LogCapture } from "../helpers/log_capture.ts";
import { withTempDir } from "../helpers/temp_dir.ts";
import { asUser, PYTHON } from "../helpers/local_user.ts";
import { statusRecord } from "../store/records.ts";
import { type Entry, tree } from "../helpers/tree.ts";

const USER = 1000;
/** A pod whose containers run as USER, without an fsGroup (storedAccess). */
const ACCESS: StoredAccess = {
  dir: { uid: 0, gid: 0, mode: 0o755 },
  file: { uid: USER, gid: 0, mode: 0o600 },
};

/** A directory outside the trees holding what a link would lead the agent to. */
async function victim(root: string): Promise<string> {
  const dir = join(root, "manifests");
  await Deno.mkdir(dir);
  await Deno.writeTextFile(join(dir, "etcd.yaml"), "the node's etcd");
  return dir;
}

/** Files of one volume at `dir`, from one literal source per file. */
function volumeOf(root: string, dir: string, files: Record<string, string>): VolumeFiles {
  const sources = Object.entries(files).map(([path, content]) => ({
    kind: "literal" as const,
    path,
    content,
  }));
  return { volume: "certs", root, dir, sources };
}

/**
 * A container's process, as its pod's user, in its volume's directory (where its mount puts it),
 * swapping the directory `sub` for a link to `target` and back as fast as it can, and planting
 * links to `target` beside it, for at most 30 s or until killed.
 */
function racer(cwd: string, target: string): Deno.ChildProcess {
  const script = `
import os, time
target = ${JSON.stringify(target)}
end = time.monotonic() + 30
while time.monotonic() < end:
    for step in (lambda: os.rename("sub", "sub.x"), lambda: os.symlink(target, "sub"),
                 lambda: os.symlink(target, "planted"), lambda: os.unlink("sub"),
                 lambda: os.rename("sub.x", "sub"), lambda: os.unlink("planted")):
        try:
            step()
        except OSError:
            pass
`;
  const [setpriv, ...args] = asUser(USER);
  return new Deno.Command(setpriv, {
    args: [...args, PYTHON, "-c", script],
    cwd,
    stdout: "null",
    stderr: "piped",
  }).spawn();
}

/**
 * Writes and prunes `dir` round after round while `racer` runs in it, going on after a failed
 * write as the agent's next pass would; returns the failures.
 */
async function raceWrites(
  root: string,
  dir: string,
  target: string,
  rounds: number,
): Promise<string[]> {
  const child = racer(dir, target);
  const failures: string[] = [];
  try {
    for (let i = 0; i < rounds; i++) {
      // Every other round drops `sub/b`: a prune of `sub` as well as writes into it.
      const files: Record<string, string> = { "sub/a": `a${i}`, "top": `t${i}` };
      if (i % 2 === 0) files["sub/b"] = "b";
      await writeVolumeFiles([volumeOf(root, dir, files)], new Map(), ACCESS)
        .catch((e: Error) => failures.push(e.message));
    }
  } finally {
    try {
      child.kill("SIGKILL");
    } catch {
      // Ended by itself: its exit status and what it said tell why.
    }
    const [status, said] = await Promise.all([child.status, new Response(child.stderr).text()]);
    assert(status.signal === "SIGKILL", `the racer ended by itself (${status.code}): ${said}`);
  }
  return failures;
}

function assertOwnDirs(entries: Record<string, Entry>) {
  for (const [path, entry] of Object.entries(entries)) {
    if (entry.type !== "dir") continue;
    assertEquals([entry.uid, entry.mode & 0o022], [0, 0], `${path} can be changed by others`);
  }
}

Deno.test("a container swapping its volume's directories for links while writes and prunes run reaches nothing outside", async () => {
  await withTempDir(async (root) => {
    const outside = await victim(root);
    const before = await tree(outside);
    const secrets = join(root, "secrets");
    const dir = join(secrets, "ns/pod/certs");
    await writeVolumeFiles(
      [volumeOf(secrets, dir, { "sub/a": "a", "sub/b": "b" })],
      new Map(),
      ACCESS,
    );
    const failures = await raceWrites(secrets, dir, outside, 200);
    assertEquals(await tree(outside), before);
    // It cannot even get in the way: its volume is not its to change.
    assertEquals(failures, []);
    const volume = await tree(dir);
    assertOwnDirs(volume);
    assertEquals(Object.keys(volume).sort(), ["sub", "sub/a", "top"]);
  });
});

Deno.test("a volume an older agent gave to the pod's user is taken back while the user races", async () => {
  await withTempDir(async (root) => {
    const outside = await victim(root);
    const before = await tree(outside);
    const secrets = join(root, "secrets");
    const dir = join(secrets, "ns/pod/certs");
    // As the agent left it before stored directories were its own: the volume and below belong
    // to the pod's user, who has planted a link in it.
    await Deno.mkdir(join(dir, "sub"), { recursive: true, mode: 0o700 });
    await Deno.symlink(outside, join(dir, "planted"));
    for (const path of [dir, join(dir, "sub")]) await Deno.chown(path, USER, USER);
    const failures = await raceWrites(secrets, dir, outside, 50);
    assertEquals(await tree(outside), before);
    assertEquals(failures, []);
    assertOwnDirs(await tree(join(root, "secrets")));
  });
});

Deno.test("links planted anywhere in the trees between passes are removed, never followed", async () => {
  await withTempDir(async (root) => {
    const outside = await victim(root);
    const before = await tree(outside);
    const trees: CheckpointTrees = {
      staticPodDir: join(root, "static"),
      inactiveDir: join(root, "inactive"),
      secretsDir: join(root, "secrets"),
      configmapsDir: join(root, "configmaps"),
    };
    const id = "ns/pod";
    const pod = { namespace: "ns", name: "pod" };
    const manifest = JSON.stringify({ metadata: { name: "pod", namespace: "ns" } });
    const origin = { madeAt: "2026-12-07T00:00:00Z", parent: { metadata: pod } };
    const volumes = (version: string) => [
      volumeOf(trees.secretsDir, join(trees.secretsDir, `ns/pod${version}/certs`), { a: "1" }),
      volumeOf(trees.secretsDir, join(trees.secretsDir, `ns/pod${version}/_volumes/v`), {
        "d/b": "2",
      }),
    ];
    const objects: ObjectData = new Map();
    const write = async () => {
      await writeVolumeFiles(volumes(""), objects, ACCESS);
      await writeVolumeFiles(volumes("/_v2"), objects, ACCESS);
      await writeVersion(trees, id, 1, { origin, manifest });
      await writeVersion(trees, id, 2, { origin, manifest });
    };
    await write();
    /** Replaces `path` by a link to the victim, whatever it was. */
    const plant = async (path: string) => {
      await Deno.remove(path, { recursive: true }).catch(() => {});
      await Deno.symlink(outside, path);
    };
    for (
      const path of [
        "secrets/ns",
        "secrets/ns/pod",
        "secrets/ns/pod/certs",
        "secrets/ns/pod/_volumes",
        "secrets/ns/pod/_volumes/v/d",
        "secrets/ns/pod/_v2",
        "inactive/.versions",
        versionsDir(trees, id).slice(root.length + 1),
      ]
    ) {
      await write();
      await plant(join(root, path));
      // Everything that reads, writes or prunes the trees, with the link in place.
      const versions = (await readStoredVersions(trees, id)).versions.length;
      assertEquals(versions, path.startsWith("inactive") ? 0 : 2, path);
      await removeStaleVolumeDirs(trees, pod, 1, volumes(""));
      await removeStaleVolumeDirs(trees, pod, 2, volumes("/_v2"));
      await pruneVersions(trees, id, { keep: 1, kept: 2, inUse: [] });
      await write();
      assertEquals(await tree(outside), before, path);
      assertEquals((await Deno.lstat(join(root, path))).isDirectory, true, path);
      assertEquals((await readStoredVersions(trees, id)).versions.length, 2, path);
    }
    assertOwnDirs(await tree(root));
    // A file replaced by a link is written over, not through.
    await plant(join(trees.secretsDir, "ns/pod/certs/a"));
    await write();
    assertEquals(await tree(outside), before);
    await plant(join(trees.secretsDir, "ns/pod"));
    assert((await removeCheckpoint(trees, id)).length > 0);
    assertEquals(await tree(outside), before);
  });
});

Deno.test("nothing is written below a configured directory others can write", async () => {
  await withTempDir(async (root) => {
    const secrets = join(root, "secrets");
    await Deno.mkdir(secrets, { mode: 0o777 });
    await Deno.chmod(secrets, 0o777);
    const write = writeVolumeFiles(
      [volumeOf(secrets, join(secrets, "ns/pod/certs"), { a: "1" })],
      new Map(),
      ACCESS,
    );
    await write.then(
      () => assert(false, "written below a world-writable directory"),
      (e: Error) => assert(e.message.includes("can be changed by others"), e.message),
    );
    assertEquals(await tree(secrets), {});
  });
});

Deno.test("the state dir's stores replace links planted for their directories, never follow them", async () => {
  await withTempDir(async (root) => {
    const outside = await victim(root);
    const before = await tree(outside);
    const stateDir = join(root, "state");
    await Deno.mkdir(stateDir, { mode: 0o700 });
    for (const sub of ["status", "sandboxes", "quarantine"]) {
      await Deno.symlink(outside, join(stateDir, sub));
    }
    const stores = await AgentStores.open(stateDir, new LogCapture().logger);
    assertEquals(stores.readOnly, undefined);
    stores.setStatus("ns/pod", statusRecord("ns/pod"));
    assertEquals((await stores.record()).status.written, ["ns/pod"]);
    assertEquals(await tree(outside), before);
    assertOwnDirs(await tree(stateDir));
  });
});
