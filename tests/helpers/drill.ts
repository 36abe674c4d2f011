/**
 * The reboot drill on a simulated node, with the real agent on the node's clock: the parents run,
 * checkpoints are taken, the node loses power, boots with the API server down (the copies must
 * run), and the API server comes back while the kubelet delays the parents' containers
 * (CreateContainerConfigError until it has read the services, retried 10 s later). The control
 * plane is self-hosted: the API server answers only while its parent or its copy runs.
 *
 * The agent is the daemon's own pass (lib/daemon/daemon.ts), every poll interval of simulated time; the
 * kubelet acts every simulated second and sees the static-pod dir at once (inotify). What it
 * returns is the kubelet's timeline for each parent, and the node at the end.
 */
import { join } from "node:path";
import { Agent } from "../../lib/pass/agent.ts";
import { manifestFileName } from "../../lib/core/checkpoint_layout.ts";
import { CHECKPOINT_ANNOTATION, podId } from "../../lib/core/pod.ts";
import type { Instant } from "../../lib/core/time.ts";
import { Daemon } from "../../lib/daemon/daemon.ts";
import { createLogger } from "../../lib/util/log.ts";
import { connectNode } from "../../lib/sources/node.ts";
import { millisBetween } from "../../lib/sim/clock.ts";
import { SimNode } from "../../lib/sim/node.ts";
import { AgentStores } from "../../lib/store/agent_stores.ts";
import { POD_NAME_LABEL, POD_NAMESPACE_LABEL, POD_UID_LABEL } from "../../lib/sources/cri.ts";
import type { RuntimeClient } from "../../lib/sources/cri.ts";
import { succeeded } from "../../lib/sources/types.ts";
import { criCall } from "../sources/cri_call.ts";
import { restoreParentPorts } from "./old_checkpoints.ts";

export interface DrillOptions {
  /** Seconds from the agent's last pass to the API server's return (0 to the poll interval). */
  offsetS: number;
  /** The agent's poll interval; default 5 s, as the daemon's. */
  pollS?: number;
  /** How long the drill watches after the API server's return; default 90 s. */
  watchS?: number;
  /** Checkpoints as versions before the port rule wrote them: the parents' ports kept. */
  oldCopies?: boolean;
  /** The rule the agent had before: a ready sandbox counts as a running pod. */
  sandboxCounts?: boolean;
}

export interface ParentOutcome {
  id: string;
  /** Seconds after the API server's return, as the kubelet's timeline shows them. */
  sandboxReadyS?: number;
  firstContainerS?: number;
  /** When the copy stopped for good; unset when it runs at the end. */
  copyStoppedS?: number;
  /** From then on its container runs; unset when it does not run at the end. */
  runningS?: number;
  /** How long neither the copy nor the parent ran; Infinity when that never ended. */
  neitherS: number;
}

export interface PassSeen {
  atS: number;
  /** The parents that had a ready sandbox and no container yet when the pass ran. */
  sandboxOnly: string[];
  /** The checkpoints active after the pass. */
  active: string[];
}

export interface DrillResult {
  parents: ParentOutcome[];
  passes: PassSeen[];
  /** At the end of the drill: */
  staticPodDir: string[];
  /** namespace/name of every pod with a running container. */
  running: string[];
  states: Record<string, string>;
  inactiveDir: string[];
  /** What the kubelet reports for each parent (phase, and reason when it has one). */
  parentPhases: Record<string, string>;
  apiServerAnswers: boolean;
}

/** When the API server comes back, counted from the boot (the agent's first pass). */
const RETURN_S = 30;

/** The rule replaced by the hand-back fix: the runtime's answer plus every ready sandbox. */
function sandboxCounts(runtime: RuntimeClient, endpoint: string): RuntimeClient {
  return {
    sandboxStatus: (id) => runtime.sandboxStatus(id),
    close: () => runtime.close(),
    async listRunningPods() {
      const result = await runtime.listRunningPods();
      if (!result.ok) return result;
      const { items } = await criCall(endpoint, "v1", "ListPodSandbox", {
        filter: { state: { state: "SANDBOX_READY" } },
      }) as { items: { id: string; labels: Record<string, string> }[] };
      const pods = [...result.value];
      for (const { id, labels } of items) {
        const [namespace, name, uid] = [POD_NAMESPACE_LABEL, POD_NAME_LABEL, POD_UID_LABEL]
          .map((label) => labels[label]);
        // The client's answer is frozen (it is kept to tell the next poll's answer unchanged).
        const at = pods.findIndex((p) => p.namespace === namespace && p.name === name);
        if (at >= 0) {
          pods[at] = { ...pods[at], sandboxIds: [...new Set([...pods[at].sandboxIds, id])] };
        } else {pods.push({
            namespace,
            name,
            uid,
            sandboxIds: [id],
            restarts: 0,
            containerRunning: true,
          });}
      }
      return succeeded(pods);
    },
  };
}

async function names(dir: string): Promise<string[]> {
  const found: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    // As the kubelet reads the dir: the inactive dir's `.versions` is no manifest.
    if (!entry.name.startsWith(".")) found.push(entry.name);
  }
  return found.sort();
}

export async function runDrill(options: DrillOptions): Promise<DrillResult> {
  const pollS = options.pollS ?? 5;
  const watchS = options.watchS ?? 90;
  const node = await SimNode.start({
    kubelet: { servicesReadAfterMs: 2_000 },
    apiServerLabels: { "k8s-app": "kube-apiserver" },
  });
  const config = node.config({ pollIntervalMs: pollS * 1000 });
  const sources = await connectNode(config);
  try {
    const log = createLogger({ minLevel: "error", write: () => {} });
    const runtime = options.sandboxCounts
      ? sandboxCounts(sources.runtime, config.containerRuntimeEndpoint)
      : sources.runtime;
    const agent = new Agent({ config, sources: { ...sources, runtime }, clock: node.clock, log });
    const stores = await AgentStores.open(config.stateDir, log);
    const daemon = new Daemon({ agent, stores, config, clock: node.clock, log });
    const parents = node.parents.filter((p) =>
      p.metadata.annotations?.[CHECKPOINT_ANNOTATION] === "true"
    );
    const ids = parents.map(podId).sort();
    const copyOf = (id: string) => `${id}-${node.nodeName}`;

    await daemon.runPass();
    await node.loseControlPlane();
    if (options.oldCopies) {
      for (const parent of parents) {
        const file = join(config.inactiveDir, manifestFileName(podId(parent)));
        await restoreParentPorts(file, parent);
      }
    }

    const returnS = RETURN_S + options.offsetS;
    let back: Instant | undefined;
    const passes: PassSeen[] = [];
    for (let t = 0; t <= returnS + watchS; t++) {
      if (t === returnS) {
        back = node.clock.now();
        await node.restoreControlPlane();
      }
      if (t % pollS === 0) {
        const sandboxOnly = back === undefined ? [] : ids.filter((id) => hasOnlySandbox(node, id));
        const report = await daemon.runPass();
        // The kubelet watches its static-pod dir: it acts on the pass's writes at once.
        await node.sync();
        if (back !== undefined) {
          passes.push({
            atS: millisBetween(back, node.clock.now()) / 1000,
            sandboxOnly,
            active: Object.entries(report.plan.state)
              .filter(([, s]) => s.state === "active").map(([id]) => id).sort(),
          });
        }
      }
      await node.advance(1_000);
    }

    const since = (at: Instant) => millisBetween(back!, at) / 1000;
    const after = node.events.filter((e) => e.at >= back!);
    const running = await runningContainers(config.containerRuntimeEndpoint);
    const outcomes = ids.map((id): ParentOutcome => {
      const mine = after.filter((e) => e.pod === id);
      const ready = mine.find((e) => e.event === "sandbox-ready");
      const first = mine.find((e) => e.event.startsWith("container-"));
      // A copy whose manifest changed is killed and started again: stopped is for good.
      const stopped = running.includes(copyOf(id))
        ? undefined
        : after.findLast((e) => e.pod === copyOf(id) && e.event === "killed");
      const lastStart = mine.findLast((e) => e.event === "container-running");
      const runs = running.includes(id) && lastStart !== undefined;
      const outcome: ParentOutcome = {
        id,
        ...(ready ? { sandboxReadyS: since(ready.at) } : {}),
        ...(first ? { firstContainerS: since(first.at) } : {}),
        ...(stopped ? { copyStoppedS: since(stopped.at) } : {}),
        ...(runs ? { runningS: since(lastStart.at) } : {}),
        neitherS: 0,
      };
      if (outcome.copyStoppedS !== undefined) {
        outcome.neitherS = outcome.runningS === undefined
          ? Infinity
          : Math.max(0, outcome.runningS - outcome.copyStoppedS);
      }
      return outcome;
    });
    const states = Object.fromEntries(
      Object.entries(daemon.lastReport!.plan.state).map(([id, s]) => [id, s.state]),
    );
    const apiPods = await sources.apiServer.listNodePods(node.nodeName);
    return {
      parents: outcomes,
      passes,
      staticPodDir: await names(config.staticPodDir),
      running,
      states,
      inactiveDir: await names(config.inactiveDir),
      parentPhases: Object.fromEntries(
        node.parents.filter((p) => ids.includes(podId(p))).map(
          (p) => {
            const status = (p.status ?? {}) as { phase?: string; reason?: string };
            return [podId(p), [status.phase, status.reason].filter(Boolean).join(" ")];
          },
        ),
      ),
      apiServerAnswers: apiPods.ok,
    };
  } finally {
    sources.runtime.close();
    await node.close();
  }
}

/** A ready sandbox of the pod's, and no container in it yet. */
function hasOnlySandbox(node: SimNode, id: string): boolean {
  const mine = node.events.filter((e) => e.pod === id);
  const ready = mine.findLastIndex((e) => e.event === "sandbox-ready");
  const killed = mine.findLastIndex((e) => e.event === "killed");
  return ready > killed && !mine.slice(ready).some((e) => e.event.startsWith("container-"));
}

/** namespace/name of the pods with a running container, asked of the runtime directly. */
async function runningContainers(endpoint: string): Promise<string[]> {
  const { containers } = await criCall(endpoint, "v1", "ListContainers", {
    filter: { state: { state: "CONTAINER_RUNNING" } },
  }) as { containers: { labels: Record<string, string> }[] };
  return [
    ...new Set(
      containers.map((c) => `${c.labels[POD_NAMESPACE_LABEL]}/${c.labels[POD_NAME_LABEL]}`),
    ),
  ].sort();
}
