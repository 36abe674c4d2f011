/**
 * `verify`'s checks of the checkpoint files themselves: the manifests in the inactive and
 * static-pod dirs, and the stored secret, configmap and downward-API files their hostPath
 * volumes mount. Read-only, like every check.
 */
import { basename, join } from "node:path";
import {
  checkpointPaths,
  type CheckpointTrees,
  type FileAccess,
  hostPathsOf,
  MANIFEST_MODE,
  manifestFileNames,
  type StoredAccess,
  storedAccess,
} from "../core/checkpoint_layout.ts";
import { parseValidId } from "../core/ids.ts";
import { checkpointIdOf, isCheckpoint } from "../core/pod.ts";
import { apiReferences } from "../core/sanitize.ts";
import { equalBytes, TEMP_MARKER } from "../disk/atomic_write.ts";
import { type ManifestDir, type ManifestFile, readManifestDir } from "../disk/manifests.ts";
import { type Check, type Finding, modeFinding } from "./check.ts";
import { agentUid, pathExists } from "../disk/dirs.ts";
import { parseManifestText, readStoredVersions } from "../disk/versions.ts";

async function bytesEqual(a: string, b: string): Promise<boolean> {
  const [x, y] = await Promise.all([Deno.readFile(a), Deno.readFile(b)]);
  return equalBytes(x, y);
}

/** Why a checkpoint's file name is none of its own, or undefined when it is one. */
function misnamed(m: ManifestFile): string | undefined {
  if (m.ours) return undefined;
  const id = checkpointIdOf(m.pod);
  if (!parseValidId(id)) return `not named after its pod ${id}`;
  const [bootkube, unambiguous] = manifestFileNames(id);
  if (bootkube === unambiguous) return `not named ${bootkube}, the name of its pod ${id}`;
  return `named neither ${bootkube} nor ${unambiguous}, the names of its pod ${id}`;
}

/** The checkpoints of one directory by id, each id's files in name order. */
function checkpointsById(dir: ManifestDir): Map<string, ManifestFile[]> {
  const byId = new Map<string, ManifestFile[]>();
  for (const m of dir.manifests) {
    if (!isCheckpoint(m.pod)) continue;
    const id = checkpointIdOf(m.pod);
    byId.set(id, [...byId.get(id) ?? [], m]);
  }
  return byId;
}

/** A finding for every file of a directory that holds the same checkpoint as another. */
function duplicates(byId: Map<string, ManifestFile[]>): Finding[] {
  return [...byId].flatMap(([id, files]) =>
    files.slice(1).map((m) => ({
      file: m.file,
      problem: `holds ${id}, as ${basename(files[0].file)} in the same directory does`,
    }))
  );
}

/**
 * Every inactive manifest is a checkpoint under one of its own names (checkpoint_layout.ts), one
 * file per checkpoint; every active one has its inactive manifest's name and content.
 */
export function manifestCheck(paths: CheckpointTrees): Check {
  return {
    name: "checkpoint manifests",
    async run() {
      const findings: Finding[] = [];
      const inactive = await readManifestDir(paths.inactiveDir);
      const inactiveById = checkpointsById(inactive);
      findings.push(...inactive.problems, ...duplicates(inactiveById));
      for (const m of inactive.manifests) {
        const problem = isCheckpoint(m.pod) ? misnamed(m) : "not a checkpoint";
        if (problem) findings.push({ file: m.file, problem });
        for (const reference of apiReferences(m.pod)) {
          findings.push({
            file: m.file,
            problem: `cannot start without the API server: ${reference}`,
          });
        }
        findings.push(
          ...modeFinding(m.file, (await Deno.stat(m.file)).mode! & 0o7777, MANIFEST_MODE),
        );
      }
      // In the static-pod dir only our checkpoints are ours to judge.
      const active = await readManifestDir(paths.staticPodDir);
      const activeById = checkpointsById(active);
      findings.push(...duplicates(activeById));
      let checked = inactive.manifests.length + inactive.problems.length;
      for (const m of active.manifests) {
        if (!m.ours || !isCheckpoint(m.pod)) continue;
        checked++;
        const source = inactiveById.get(checkpointIdOf(m.pod))?.find((i) => i.ours)?.file;
        if (source === undefined) {
          findings.push({
            file: m.file,
            problem: "active checkpoint without an inactive manifest",
          });
        } else if (basename(source) !== basename(m.file)) {
          findings.push({ file: m.file, problem: `named otherwise than ${source}` });
        } else if (!await bytesEqual(m.file, source).catch(() => false)) {
          findings.push({ file: m.file, problem: `differs from ${source}` });
        }
      }
      return { checked, findings };
    },
  };
}

/** Who owns a stored entry, and with which mode, against what its pod's files must have. */
function accessFindings(path: string, info: Deno.FileInfo, want: FileAccess): Finding[] {
  const findings = modeFinding(path, info.mode! & 0o7777, want.mode);
  if (info.uid !== want.uid || info.gid !== want.gid) {
    findings.push({
      file: path,
      problem: `owned by ${info.uid}:${info.gid}, expected ${want.uid}:${want.gid}`,
    });
  }
  return findings;
}

/**
 * Walks one stored directory: only regular files and directories, readable by the pod's user
 * (and its fsGroup) and no one else but root, in directories no one but the agent can change
 * (storedAccess).
 */
async function checkTree(path: string, access: StoredAccess, findings: Finding[]): Promise<number> {
  const info = await Deno.lstat(path);
  const kind = info.isDirectory ? "dir" : info.isFile ? "file" : "other";
  if (kind === "other") {
    findings.push({ file: path, problem: "neither a regular file nor a directory" });
    return 1;
  }
  if (kind === "file" && path.includes(TEMP_MARKER)) {
    findings.push({ file: path, problem: "leftover temp file of an interrupted write" });
  }
  findings.push(...accessFindings(path, info, access[kind]));
  let checked = 1;
  if (kind === "dir") {
    for await (const entry of Deno.readDir(path)) {
      checked += await checkTree(join(path, entry.name), access, findings);
    }
  }
  return checked;
}

/** What a pod's file directory holds beyond the volumes its checkpoint mounts. */
async function unmounted(dir: string, mounted: Set<string>): Promise<string[]> {
  if (!await pathExists(dir)) return [];
  const out: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    const path = join(dir, entry.name);
    if (mounted.has(path)) continue;
    const leadsToMounted = [...mounted].some((m) => m.startsWith(`${path}/`));
    if (entry.isDirectory && leadsToMounted) out.push(...await unmounted(path, mounted));
    else out.push(path);
  }
  return out;
}

/** Direct children of `<base>/<ns>/`: the per-pod directories of stored files. */
async function podDirsUnder(base: string): Promise<string[]> {
  const out: string[] = [];
  if (!await pathExists(base)) return out;
  for await (const ns of Deno.readDir(base)) {
    if (!ns.isDirectory) continue;
    for await (const pod of Deno.readDir(join(base, ns.name))) {
      out.push(join(base, ns.name, pod.name));
    }
  }
  return out;
}

/** The stored files every checkpoint mounts exist, and only its pod's user can read them. */
export function storedFilesCheck(paths: CheckpointTrees): Check {
  return {
    name: "stored secret and configmap files",
    async run() {
      const findings: Finding[] = [];
      let checked = 0;
      const podDirs = new Set<string>();
      const bases = [paths.secretsDir, paths.configmapsDir];
      for (const m of (await readManifestDir(paths.inactiveDir)).manifests) {
        const id = checkpointIdOf(m.pod);
        if (!isCheckpoint(m.pod) || !parseValidId(id)) continue;
        const p = checkpointPaths(paths, id);
        podDirs.add(p.secretsDir).add(p.configmapsDir);
        const access = storedAccess(m.pod, agentUid());
        if ("error" in access) {
          findings.push({ file: m.file, problem: access.error });
          continue;
        }
        // Every version kept mounts files of its own (docs/design.md#versions).
        const versions = (await readStoredVersions(paths, id)).versions.flatMap((v) =>
          parseManifestText(v.text) ?? []
        );
        const mounted = new Set(
          [m.pod, ...versions].flatMap(hostPathsOf).filter((dir) =>
            bases.some((base) => dir.startsWith(`${base}/`))
          ),
        );
        for (
          const path of [
            ...await unmounted(p.secretsDir, mounted),
            ...await unmounted(p.configmapsDir, mounted),
          ]
        ) {
          findings.push({ file: path, problem: `not mounted by ${id}` });
        }
        for (const dir of mounted) {
          if (!await pathExists(dir)) {
            findings.push({ file: dir, problem: `mounted by ${id} but not stored yet` });
            continue;
          }
          checked += await checkTree(dir, access, findings);
        }
      }
      for (const base of bases) {
        for (const dir of await podDirsUnder(base)) {
          if (!podDirs.has(dir)) findings.push({ file: dir, problem: "belongs to no checkpoint" });
        }
      }
      return { checked, findings };
    },
  };
}
