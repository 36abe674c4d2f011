/**
 * Checkpoint manifests as versions before the port rule wrote them: the sanitized copy with its
 * parent's `ports` still declared. Written in place (mode kept), as an upgrade finds them.
 */
import type { Pod } from "../../lib/core/pod.ts";

type Containers = { name: string; ports?: unknown[] }[];

export async function restoreParentPorts(manifestFile: string, parent: Pod): Promise<void> {
  const manifest = JSON.parse(await Deno.readTextFile(manifestFile));
  const declared = new Map(
    ((parent.spec as { containers?: Containers }).containers ?? []).map((c) => [c.name, c.ports]),
  );
  for (const container of manifest.spec.containers as Containers) {
    const ports = declared.get(container.name);
    if (ports) container.ports = structuredClone(ports);
  }
  await Deno.writeTextFile(manifestFile, JSON.stringify(manifest, null, 2) + "\n");
}
