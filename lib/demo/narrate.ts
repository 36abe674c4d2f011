/**
 * The demo told for a person: for each step, what happened to the node, then for each pass what
 * the agent observed, what it decided and why, and what it wrote — the files read from the disk,
 * with their modes and owners — and finally which expectations held.
 */
import type { FileView, PassRecord, StepRecord } from "./step.ts";
import type { DemoNodeInfo, DemoResult } from "./run.ts";

const WIDTH = 100;

function wrap(text: string, indent: string, width = WIDTH): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line && indent.length + line.length + 1 + word.length > width) {
      lines.push(indent + line);
      line = word;
    } else {
      line = line ? `${line} ${word}` : word;
    }
  }
  if (line) lines.push(indent + line);
  return lines;
}

/** `kube-system/kube-apiserver-7x2kq` → `kube-apiserver-7x2kq`: every pod here is in one namespace. */
function short(id: string): string {
  return id.slice(id.indexOf("/") + 1);
}

function shortList(list: string[]): string {
  return list.map(short).join(", ");
}

function sourcesLine(pass: PassRecord): string {
  return Object.entries(pass.sources)
    .map(([source, status]) => `${source} ${status === "ok" ? "ok" : status.split(":")[0]}`)
    .join(" · ");
}

function decisions(pass: PassRecord): string[] {
  const groups = new Map<string, { ids: string[]; head: string; why: string }>();
  for (const c of pass.changes) {
    const key = [c.from, c.to, c.reason, c.message].join("\0");
    const group = groups.get(key) ??
      { ids: [], head: `${c.from} → ${c.to}`, why: `${c.reason}: ${c.message}` };
    group.ids.push(c.id);
    groups.set(key, group);
  }
  if (groups.size === 0) return ["    decided  no state changes"];
  return [...groups.values()].flatMap((g) => [
    ...wrap(`${g.head} for ${shortList(g.ids)}`, "             ").map((l, i) =>
      i === 0 ? `    decided  ${l.trimStart()}` : l
    ),
    ...wrap(`why: ${g.why}`, "             "),
  ]);
}

function planLine(pass: PassRecord): string {
  const verb = (word: string) => pass.dryRun ? `would ${word}` : word;
  const parts = [
    [verb("start"), pass.plan.starts],
    [verb("stop"), pass.plan.stops],
    [verb("remove"), pass.plan.removes],
  ].filter(([, ids]) => ids.length > 0)
    .map(([word, ids]) => `${word} ${shortList(ids as string[])}`);
  return `    plan     ${parts.length ? parts.join("; ") : "nothing to start, stop or remove"}`;
}

function fileLine(mark: string, file: FileView): string {
  return `      ${mark} ${file.mode} ${file.owner.padEnd(11)} ${file.path}`;
}

/** A deleted directory stands for everything that was in it. */
function removedLines(removed: string[]): string[] {
  const gone = new Set(removed);
  const within = (path: string) => removed.filter((p) => p.startsWith(`${path}/`)).length;
  return removed
    .filter((path) => !gone.has(path.slice(0, path.lastIndexOf("/"))))
    .map((path) => {
      const inside = within(path);
      return `      - ${path}${inside ? `/ (and the ${inside} entries in it)` : ""}`;
    });
}

function writes(pass: PassRecord): string[] {
  if (pass.dryRun) return ["    wrote    nothing (dry run)"];
  const { created, changed, removed } = pass.disk;
  const files = [
    ...created.filter((f) => f.type === "file").map((f) => fileLine("+", f)),
    ...changed.map((f) => fileLine("~", f)),
    ...removedLines(removed),
  ];
  if (files.length === 0) return ["    wrote    nothing"];
  const dirModes = [...new Set(created.filter((f) => f.type === "dir").map((f) => f.mode))];
  return [
    "    wrote",
    ...files,
    ...(dirModes.length ? [`      and new directories, mode ${dirModes.join(", ")}`] : []),
  ];
}

function passLines(pass: PassRecord): string[] {
  const kind = pass.dryRun ? "dry run" : "pass";
  return [
    `  ▸ ${kind} at ${pass.at}`,
    `    observed ${sourcesLine(pass)}`,
    ...decisions(pass),
    planLine(pass),
    ...writes(pass),
    ...pass.errors.map((e) => `    ERROR    ${e.op} ${e.id ?? ""}: ${e.message}`),
  ];
}

export function narrateStart(node: DemoNodeInfo): string {
  return [
    "ckpt-agent demo: the real agent on a simulated control-plane node, all on loopback",
    `  node ${node.name}, in ${node.root} (paths below are relative to it)`,
    `  API server ${node.apiServer} · kubelet ${node.kubelet}`,
    `  container runtime (CRI over gRPC) ${node.runtime}`,
    `  static-pod dir ${node.staticPodDir} · inactive checkpoints ${node.inactiveDir}`,
    `  pods run as ${node.podUser}${
      node.podsRunAsYou
        ? " (you, with your group as their fsGroup: only root can give files to another user)"
        : ""
    }; grace period ${node.gracePeriodSeconds} s`,
    "  Files the agent wrote: + new, ~ rewritten, - deleted; then mode, owner uid:gid, path.",
    "",
  ].join("\n");
}

export function narrateStep(step: StepRecord, index: number, total: number): string {
  const lines = [`${index + 1}/${total} ${step.title}`];
  for (const event of step.events) {
    if (event.type === "narration") lines.push(...wrap(event.text, "  "));
    else lines.push(...passLines(event));
  }
  lines.push(...wrap(`static-pod dir now: ${step.staticPodDir.join(", ") || "empty"}`, "  "));
  lines.push(...wrap(`running now: ${shortList(step.running) || "nothing"}`, "  "));
  for (const check of step.checks) {
    lines.push(`  ${check.held ? "✓" : "✗"} ${check.expect}`);
    if (!check.held && check.saw !== undefined) lines.push(`      saw: ${check.saw}`);
  }
  return lines.join("\n") + "\n";
}

export function narrateEnd(result: DemoResult): string {
  const held = result.steps.filter((s) => s.ok).length;
  const lines = [
    `${held} of ${result.steps.length} steps went as expected.`,
  ];
  if (result.stopped) lines.push(`The story stopped early: ${result.stopped}`);
  lines.push(
    result.leftBehind.length === 0
      ? `The simulated node is shut down and ${result.node.root} is removed.`
      : `Could not remove: ${result.leftBehind.join(", ")}`,
  );
  lines.push(result.ok ? "Demo OK." : "Demo FAILED.");
  return lines.join("\n");
}
