/**
 * One run of the demo: a simulated node (lib/sim/node.ts) and the real agent connected to it
 * exactly as `ckpt-agent run` connects to a real node — the clients of lib/sources/node.ts, the stores
 * of the state directory — with two differences: the agent's clock can skip time, and its log
 * lines are kept for the story instead of going to standard error.
 */
import { Agent } from "../pass/agent.ts";
import type { Config } from "../config/types.ts";
import { instantToDate } from "../core/time.ts";
import { createLogger } from "../util/log.ts";
import { connectNode } from "../sources/node.ts";
import type { ControlPlane } from "../sim/control_plane.ts";
import { SimNode } from "../sim/node.ts";
import { AgentStores } from "../store/agent_stores.ts";
import type { RuntimeClient } from "../sources/cri.ts";
import { SkippingClock } from "./clock.ts";
import { currentUser, demoCluster, type UserIds } from "./cluster.ts";
import { pathExists } from "../disk/dirs.ts";

export const DEMO_NODE_NAME = "cp-1";

/** Every runtime call of a pass is over in this time; the simulated runtime answers at once. */
const RUNTIME_TIMEOUT_MS = 2_000;

/**
 * The kubelet of the demo reads the services 2 s after the API server is back, as in a real
 * drill: its first attempt at a parent's containers fails, and the next comes this much later.
 */
export const SYNC_RETRY_MS = 10_000;

/**
 * The node's API server is self-hosted: it answers only while a pod with these labels runs (the
 * DaemonSet's pod, or its copy), so that a rollout that breaks it takes the API away.
 */
export const API_SERVER_LABELS = { "k8s-app": "kube-apiserver" };

export interface DemoSession {
  node: SimNode;
  config: Config;
  cluster: ControlPlane;
  user: UserIds;
  agent: Agent;
  stores: AgentStores;
  /** The runtime client the agent uses, asked again to show what runs. */
  runtime: RuntimeClient;
  clock: SkippingClock;
  /** The agent's log lines since the last call, as parsed JSON objects. */
  takeLog(): Record<string, unknown>[];
}

export async function openSession(): Promise<DemoSession> {
  const user = await currentUser();
  const cluster = demoCluster(DEMO_NODE_NAME, user);
  const node = await SimNode.start({
    nodeName: DEMO_NODE_NAME,
    cluster,
    kubelet: { servicesReadAfterMs: 2_000, syncRetryMs: SYNC_RETRY_MS },
    apiServerLabels: API_SERVER_LABELS,
  });
  let runtime: RuntimeClient | undefined;
  try {
    const config = node.config({ runtimeRequestTimeoutMs: RUNTIME_TIMEOUT_MS });
    const clock = new SkippingClock();
    let lines: Record<string, unknown>[] = [];
    const log = createLogger({
      minLevel: "info",
      write: (line) => lines.push(JSON.parse(line)),
      // Log times follow the agent's clock, skipped time included.
      now: () => instantToDate(clock.now()),
    });
    const sources = await connectNode(config);
    runtime = sources.runtime;
    return {
      node,
      config,
      cluster,
      user,
      agent: new Agent({ config, sources, clock, log }),
      stores: await AgentStores.open(config.stateDir, log),
      runtime,
      clock,
      takeLog() {
        const taken = lines;
        lines = [];
        return taken;
      },
    };
  } catch (e) {
    runtime?.close();
    await closeNode(node);
    throw e;
  }
}

/** Closes the servers and removes the node's directory even if a server fails to close. */
async function closeNode(node: SimNode): Promise<void> {
  try {
    await node.close();
  } finally {
    await Deno.remove(node.root, { recursive: true }).catch(() => {});
  }
}

/** Ends the session; returns what it could not remove (nothing, normally). */
export async function closeSession(session: DemoSession): Promise<string[]> {
  session.runtime.close();
  await closeNode(session.node);
  return await pathExists(session.node.root) ? [session.node.root] : [];
}
