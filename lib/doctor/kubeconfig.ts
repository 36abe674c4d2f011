/**
 * The configured kubeconfig, when the agent cannot use it at all: a missing file is said to be
 * missing (not taken for credentials the API server refused), with the kubeconfigs this node has
 * that would do — the running kubelet's own (its --kubeconfig flag), then those kubelets are
 * commonly given. The kubelet's own is the one README.md recommends: its identity,
 * system:node:<nodeName>, is what the Node authorizer lets read the node's pods and their secrets
 * and configmaps.
 */
import { resolve } from "node:path";
import type { Config } from "../config/types.ts";
import type { KubeconfigResult } from "../sources/kubeconfig.ts";
import { error, type Finding } from "./finding.ts";
import { findKubelets, flagValue } from "./kubelet.ts";

/**
 * Where kubelets' kubeconfigs commonly are: kubeadm's, then where other installers put it. The
 * setting's default, /etc/kubernetes/kubeconfig, is bootkube's (README.md, "Credentials and RBAC",
 * says why it stays).
 */
export const KUBELET_KUBECONFIGS: readonly string[] = [
  "/etc/kubernetes/kubelet.conf",
  "/var/lib/kubelet/kubeconfig",
];

/** A kubeconfig found on this node, and where it was found. */
export interface FoundKubeconfig {
  path: string;
  from: "the running kubelet's --kubeconfig" | "on this node";
}

/**
 * The kubeconfigs that exist: each running kubelet's --kubeconfig, then `commonPaths`, once
 * each. Processes that cannot be read add nothing (the static-pod-dir check says why).
 */
export async function findKubeconfigs(
  procRoot: string,
  commonPaths: readonly string[],
): Promise<FoundKubeconfig[]> {
  const kubelets = await findKubelets(procRoot).catch(() => []);
  const candidates: FoundKubeconfig[] = [
    ...kubelets.flatMap((kubelet): FoundKubeconfig[] => {
      const flag = flagValue(kubelet.args, "kubeconfig");
      return flag ? [{ path: resolve("/", flag), from: "the running kubelet's --kubeconfig" }] : [];
    }),
    ...commonPaths.map((path): FoundKubeconfig => ({ path, from: "on this node" })),
  ];
  const found: FoundKubeconfig[] = [];
  for (const candidate of candidates) {
    if (found.some((f) => f.path === candidate.path)) continue;
    if ((await Deno.stat(candidate.path).catch(() => undefined))?.isFile) found.push(candidate);
  }
  return found;
}

/** What to set `kubeconfig` to: the first kubeconfig found, or where to look for one. */
function suggestion(config: Config, found: readonly FoundKubeconfig[]): string {
  const [first, ...others] = found.filter((f) => f.path !== resolve(config.kubeconfig));
  if (first === undefined) {
    return "set kubeconfig (--kubeconfig) to the kubelet's own kubeconfig (the file its " +
      `--kubeconfig flag names; kubeadm's is ${KUBELET_KUBECONFIGS[0]}), or to one for an ` +
      'identity of the agent\'s own (README.md, "Credentials and RBAC")';
  }
  const also = others.length === 0
    ? ""
    : `; also on this node: ${others.map((f) => f.path).join(", ")}`;
  return `set kubeconfig (--kubeconfig) to ${first.path} (${first.from}${also}): the kubelet's ` +
    `own identity, system:node:${config.nodeName}, which the Node authorizer lets read this ` +
    "node's pods and their secrets and configmaps";
}

/** A finding about the kubeconfig when the agent cannot load it; undefined when it can. */
export async function kubeconfigFinding(
  config: Config,
  kubeconfig: KubeconfigResult,
  found: readonly FoundKubeconfig[],
): Promise<Finding | undefined> {
  if (kubeconfig.ok) return undefined;
  const outage = "the agent cannot ask the API server, and takes every pass for an outage";
  const missing = await Deno.lstat(config.kubeconfig).then(
    () => false,
    (e) => e instanceof Deno.errors.NotFound,
  );
  if (missing) {
    return error(
      "source",
      "apiserver",
      `missing file ${config.kubeconfig} (kubeconfig, --kubeconfig): ${outage}`,
      suggestion(config, found),
    );
  }
  return error(
    "source",
    "apiserver",
    `the kubeconfig cannot be used (${kubeconfig.error}): ${outage}`,
    `correct ${config.kubeconfig} as the message says, or ${suggestion(config, found)}`,
  );
}
