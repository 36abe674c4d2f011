/**
 * Each source answers with the configured credentials, asked as a pass asks it; the parents it
 * names that are not on the host network; and the API server's clock (clock.ts).
 *
 * Levels follow what a failure means to the agent (docs/design.md#source-failures): credentials
 * refused or unusable are errors, as the agent can then never see the control plane; an API
 * server or kubelet that does not answer is a warning, as it is during an outage, which is when
 * doctor is most likely run; a runtime that does not answer is an error, as every checkpoint
 * then holds its state and none is activated.
 */
import type { Config } from "../config/types.ts";
import {
  CHECKPOINT_ANNOTATION,
  EVERY_NAMESPACE,
  inNamespaces,
  isValidParent,
  type Pod,
  podId,
} from "../core/pod.ts";
import { askServerTime, type ServerTime } from "../sources/apiserver.ts";
import type { KubeconfigResult } from "../sources/kubeconfig.ts";
import { type KubeletPods, SELF_SIGNED_KUBELET_CA } from "../sources/kubelet.ts";
import type { NodeSources } from "../sources/node.ts";
import { failed, isConfigurationFailure, type SourceResult } from "../sources/types.ts";
import type { Fields } from "../util/log.ts";
import { missingPermission } from "../util/permission.ts";
import { clockFinding } from "./clock.ts";
import { describeFailure, error, type Finding, ok, warning } from "./finding.ts";
import { type FoundKubeconfig, kubeconfigFinding } from "./kubeconfig.ts";

function apiServerFinding(config: Config, result: SourceResult<Pod[]>): Finding {
  const subject = "apiserver";
  if (result.ok) {
    return ok(
      "source",
      subject,
      `the API server answers with the kubeconfig's credentials: ${result.value.length} pods ` +
        `bound to node ${config.nodeName}`,
    );
  }
  const failure = result.failure;
  if (isConfigurationFailure(failure)) {
    const fix = failure.kind === "forbidden"
      ? `let the kubeconfig's identity get and list pods, secrets and configmaps (a node's ` +
        `identity, system:node:${config.nodeName}, may under the Node authorizer)`
      : `correct the kubeconfig ${config.kubeconfig} (kubeconfig, --kubeconfig), or renew the ` +
        "credentials it names; the agent reads them again on its next pass";
    return error(
      "source",
      subject,
      `the API server does not accept the kubeconfig's credentials (${
        describeFailure(failure)
      }): the agent takes every pass for an outage`,
      fix,
    );
  }
  return warning(
    "source",
    subject,
    `the API server does not answer (${describeFailure(failure)}). During an outage this is ` +
      "expected, and it is what lets the agent activate checkpoints",
    `when the control plane is up, check the server in ${config.kubeconfig} and the way to it ` +
      "(proxy variables, a kubeconfig proxy-url), and apiTimeout",
  );
}

function kubeletFinding(
  config: Config,
  result: SourceResult<KubeletPods>,
  apiServerDown: boolean,
  unverified: string | undefined,
): Finding {
  const subject = "kubelet";
  if (result.ok) {
    const found = `the kubelet at ${config.kubeletUrl} answers: ${result.value.pods.length} pods`;
    if (result.value.verified) return ok("source", subject, found);
    if (unverified === undefined) {
      return ok(
        "source",
        subject,
        `${found}, read unverified (kubeletCaFile is off, or the read-only port answered): ` +
          "its answers add no parent",
      );
    }
    return warning(
      "source",
      subject,
      `${found}, asked unverified (${unverified}): its answers add no parent`,
      `set kubeletCaFile (--kubelet-ca-file) to the CA of the kubelet's serving certificate (for ` +
        `a kubelet's own self-signed certificate: ${SELF_SIGNED_KUBELET_CA}), or to off to ask it ` +
        "unverified knowingly",
    );
  }
  const failure = result.failure;
  const found = `the kubelet does not answer /pods (${describeFailure(failure)})`;
  if (failure.kind === "misconfigured") {
    return error(
      "source",
      subject,
      `${found}: the agent discovers no parents through it`,
      "set kubeletCaFile (--kubelet-ca-file) as the message says, or correct the kubeconfig " +
        `${config.kubeconfig}`,
    );
  }
  if (failure.kind === "unauthorized" || failure.kind === "forbidden") {
    // A kubelet with webhook authorization asks the API server about every request.
    if (apiServerDown) {
      return warning(
        "source",
        subject,
        `${found}; with the API server down, a kubelet that authorizes requests through it ` +
          "refuses every request: expected during an outage",
        "check again once the API server answers; set kubeletReadonlyUrl to ask the read-only " +
          "port meanwhile",
      );
    }
    return error(
      "source",
      subject,
      `${found}: the kubelet refuses the kubeconfig's credentials, and the agent discovers no ` +
        "parents while the API server is down",
      "let the kubeconfig's identity get nodes/proxy (the kubelet's /pods) on this node",
    );
  }
  return warning(
    "source",
    subject,
    `${found}: while it does not, the agent discovers no new parents from it`,
    `check that the kubelet runs and listens at kubeletUrl ${config.kubeletUrl}, and ` +
      "kubeletTimeout",
  );
}

function runtimeFinding(config: Config, result: SourceResult<unknown[]>): Finding {
  const subject = "runtime";
  if (result.ok) {
    return ok(
      "source",
      subject,
      `the container runtime at ${config.containerRuntimeEndpoint} answers (CRI Version and ` +
        `lists): ${result.value.length} pods running`,
    );
  }
  return error(
    "source",
    subject,
    `the container runtime does not answer (${describeFailure(result.failure)}): while it does ` +
      "not, every checkpoint holds its state, and none is activated",
    `check that the runtime runs (systemctl status containerd) and that ` +
      `containerRuntimeEndpoint ${config.containerRuntimeEndpoint} is its CRI socket`,
  );
}

/** The parents the agent would see, filtered as the agent does; undefined: no source said. */
function parentsFrom(
  config: Config,
  api: SourceResult<Pod[]>,
  kubelet: SourceResult<KubeletPods>,
) {
  const pods = api.ok ? api.value : kubelet.ok ? kubelet.value.pods : undefined;
  if (pods === undefined) return undefined;
  const from = api.ok
    ? "the API server"
    : kubelet.ok && kubelet.value.verified
    ? "the kubelet (the API server did not answer)"
    : "the kubelet, read unverified (the API server did not answer), which adds no parent";
  const inScope = inNamespaces(config.namespaces);
  return {
    from,
    parents: pods.filter((pod) => isValidParent(pod) && inScope(pod.metadata.namespace)),
  };
}

function parentFindings(
  config: Config,
  api: SourceResult<Pod[]>,
  kubelet: SourceResult<KubeletPods>,
): Finding[] {
  const seen = parentsFrom(config, api, kubelet);
  if (seen === undefined) {
    return [warning(
      "parent-network",
      "parents",
      "parents not checked: neither the API server nor the kubelet answered",
      "run doctor again once one of them answers",
    )];
  }
  const { from, parents } = seen;
  if (parents.length === 0) {
    return [warning(
      "parent-network",
      "parents",
      `no pod asks to be checkpointed (from ${from}${
        config.namespaces.includes(EVERY_NAMESPACE)
          ? ""
          : `, in namespaces ${config.namespaces.join(", ")}`
      }): nothing on this node is protected`,
      `annotate the control-plane pods ${CHECKPOINT_ANNOTATION}: "true", or correct namespace`,
    )];
  }
  const findings: Finding[] = [];
  for (const parent of parents) {
    const id = podId(parent);
    if (parent.spec?.hostNetwork === true) {
      findings.push(ok("parent-network", id, `parent ${id} is on the host network`));
      continue;
    }
    findings.push(warning(
      "parent-network",
      id,
      `parent ${id} (from ${from}) is not on the host network: its checkpoint needs the pod ` +
        "network, which on most clusters needs the control plane (the network plugin's own " +
        "pods and datastore), so it may not start during an outage",
      `run ${id}'s workload with hostNetwork: true, or remove its ${CHECKPOINT_ANNOTATION} ` +
        "annotation if it cannot help during an outage",
    ));
  }
  return findings;
}

/**
 * A source the agent's own permissions kept it from asking, whichever: an error of its flags,
 * never the outage an unanswered source may be (docs/design.md#own-failures).
 */
function permissionFinding(subject: string, result: SourceResult<unknown>): Finding | undefined {
  if (result.ok || result.failure.kind !== "not-permitted") return undefined;
  const missing = missingPermission(result.failure.message);
  return error(
    "source",
    subject,
    `the agent may not ask the ${subject} (${
      describeFailure(result.failure)
    }): a permission it runs without, not an outage; while it lacks it, every checkpoint holds ` +
      "its state",
    `run the agent with ${missing?.flag ?? "the permission the message names"} (the flags ` +
      "the binary is built with: scripts/permissions.ts)",
  );
}

/**
 * `told`: the fields of what the clients logged while they were asked (a kubelet whose serving
 * certificate did not verify, asked unverified); filled as they are asked. `found`: the
 * kubeconfigs on this node, suggested when the configured one cannot be loaded.
 */
export async function sourceFindings(
  config: Config,
  sources: NodeSources,
  kubeconfig: KubeconfigResult,
  now: () => number,
  told: readonly Fields[],
  found: readonly FoundKubeconfig[],
): Promise<Finding[]> {
  const [api, kubelet, running, time] = await Promise.all([
    sources.apiServer.listNodePods(config.nodeName),
    sources.kubelet.listPods(),
    sources.runtime.listRunningPods(),
    kubeconfig.ok
      ? askServerTime(kubeconfig.credentials, config.apiTimeoutMs, now)
      : Promise.resolve(failed<ServerTime>("apiserver", "misconfigured", kubeconfig.error)),
  ]);
  const said = told.find((fields) => fields.kubelet === config.kubeletUrl);
  const unverified = said === undefined ? undefined : String(said.error);
  return [
    await kubeconfigFinding(config, kubeconfig, found) ?? permissionFinding("apiserver", api) ??
      apiServerFinding(config, api),
    permissionFinding("kubelet", kubelet) ?? kubeletFinding(config, kubelet, !api.ok, unverified),
    permissionFinding("runtime", running) ?? runtimeFinding(config, running),
    ...parentFindings(config, api, kubelet),
    clockFinding(time),
  ];
}
