/**
 * `verify`'s check that no checkpoint declares a host port. While a copy that declares one runs,
 * the kubelet refuses its returning parent (the NodePorts predicate: a host port an admitted pod
 * already declares), and the parent never runs. The agent writes copies without ports; a
 * manifest that has them was written by an older version, or by hand.
 */
import { isCheckpoint } from "../core/pod.ts";
import { declaredHostPorts } from "../core/ports.ts";
import type { CheckpointTrees } from "../core/checkpoint_layout.ts";
import { type ManifestFile, readManifestDir } from "../disk/manifests.ts";
import type { Check, Finding } from "./check.ts";

export function hostPortCheck(paths: CheckpointTrees): Check {
  return {
    name: "checkpoint host ports",
    async run() {
      const [inactive, active] = await Promise.all([
        readManifestDir(paths.inactiveDir),
        readManifestDir(paths.staticPodDir),
      ]);
      // In the static-pod dir only our checkpoints are ours to judge.
      const checkpoints = [
        ...inactive.manifests.filter((m) => isCheckpoint(m.pod)),
        ...active.manifests.filter((m) => m.ours && isCheckpoint(m.pod)),
      ];
      // The manifest check counts these files; this one only reads them again.
      return { checked: 0, findings: checkpoints.flatMap(hostPortFindings) };
    },
  };
}

function hostPortFindings(manifest: ManifestFile): Finding[] {
  return declaredHostPorts(manifest.pod).map((port) => ({
    file: manifest.file,
    problem: `container ${port.container} declares host port ${port.hostPort}/${
      port.protocol || "TCP"
    }: while this checkpoint runs, the kubelet refuses its parent (NodePorts)`,
  }));
}
