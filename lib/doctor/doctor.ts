/**
 * `ckpt-agent doctor`: whether this node is set up so that the agent can bring its control plane
 * back. Read-only: it asks the sources as a pass does and writes nothing (docs/design.md#doctor).
 */
import type { Config } from "../config/types.ts";
import { loadKubeconfig } from "../sources/kubeconfig.ts";
import { connectNode } from "../sources/node.ts";
import { type Fields, type Logger, silentLogger } from "../util/log.ts";
import { certificateFindings } from "./certificates.ts";
import { directoryFindings } from "./dirs.ts";
import { type DoctorReport, doctorReport } from "./finding.ts";
import { findKubeconfigs, KUBELET_KUBECONFIGS } from "./kubeconfig.ts";
import { staticPodDirFindings } from "./kubelet.ts";
import { sourceFindings } from "./sources.ts";
import { SYSTEM_UNIT_PATH, unitFindings } from "./systemd_unit.ts";

export interface DoctorOptions {
  /** Where the processes are, to find the kubelet's; default /proc. */
  procRoot?: string;
  /** Where the unit files are looked for; default systemd's search path. */
  unitSearchPath?: readonly string[];
  /** The node's clock, in milliseconds; default Date.now. */
  now?: () => number;
  /** Where kubelets' kubeconfigs commonly are, to suggest one; default KUBELET_KUBECONFIGS. */
  commonKubeconfigs?: readonly string[];
}

export async function runDoctor(
  config: Config,
  options: DoctorOptions = {},
): Promise<DoctorReport> {
  const now = options.now ?? Date.now;
  const procRoot = options.procRoot ?? "/proc";
  const kubeconfig = loadKubeconfig(config.kubeconfig);
  const found = kubeconfig.ok
    ? []
    : await findKubeconfigs(procRoot, options.commonKubeconfigs ?? KUBELET_KUBECONFIGS);
  // What the clients would tell the agent's log: a kubelet asked unverified.
  const told: Fields[] = [];
  const log: Logger = { ...silentLogger, warn: (_msg, fields = {}) => told.push(fields) };
  const sources = await connectNode(config, { log });
  try {
    const findings = await Promise.all([
      staticPodDirFindings(config, procRoot),
      directoryFindings(config),
      unitFindings(config, options.unitSearchPath ?? SYSTEM_UNIT_PATH),
      sourceFindings(config, sources, kubeconfig, now, told, found),
      certificateFindings(config, kubeconfig, now()),
    ]);
    return doctorReport(findings.flat());
  } finally {
    sources.runtime.close();
  }
}
