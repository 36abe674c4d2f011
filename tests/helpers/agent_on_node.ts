/**
 * The real agent in-process on a simulated node, with a clock the test moves and every log line
 * kept; it can be restarted (a new agent and newly opened stores, as a new process would have)
 * with other settings.
 */
import { Agent } from "../../lib/pass/agent.ts";
import type { PassReport } from "../../lib/pass/report.ts";
import type { Config } from "../../lib/config/types.ts";
import { Daemon } from "../../lib/daemon/daemon.ts";
import { connectNode, type NodeSources } from "../../lib/sources/node.ts";
import { SimNode, type SimNodeOptions } from "../../lib/sim/node.ts";
import { AgentStores } from "../../lib/store/agent_stores.ts";
import { LogCapture, ManualClock } from "../admin/harness.ts";

export class AgentOnNode {
  readonly log = new LogCapture();
  readonly clock = new ManualClock();
  #running?: { agent: Agent; stores: AgentStores; sources: NodeSources; config: Config };

  private constructor(readonly node: SimNode, readonly overrides: Partial<Config>) {}

  /** `overrides`: settings of every agent started on this node (e.g. directories). */
  static async start(
    options: SimNodeOptions = {},
    overrides: Partial<Config> = {},
  ): Promise<AgentOnNode> {
    return new AgentOnNode(await SimNode.start(options), overrides);
  }

  config(extra: Partial<Config> = {}): Config {
    return this.node.config({ ...this.overrides, ...extra });
  }

  /** A new agent, as after a restart; `extra` settings for this one only. */
  async restart(extra: Partial<Config> = {}) {
    this.#running?.sources.runtime.close();
    this.#running = undefined;
    const config = this.config(extra);
    const sources = await connectNode(config);
    try {
      const stores = await AgentStores.open(config.stateDir, this.log.logger);
      const agent = new Agent({ config, sources, clock: this.clock, log: this.log.logger });
      this.#running = { agent, stores, sources, config };
    } catch (e) {
      sources.runtime.close();
      throw e;
    }
  }

  async #current() {
    if (!this.#running) await this.restart();
    return this.#running!;
  }

  /** One pass, then the simulated kubelet catches up with what it wrote; `cut` as Agent.pass's. */
  async pass(cut?: AbortSignal): Promise<PassReport> {
    const { agent, stores } = await this.#current();
    const report = await agent.pass(stores, cut ? { cut } : {});
    await this.node.sync();
    return report;
  }

  /** The daemon around the current agent, for tests of its loop. */
  async daemon(): Promise<Daemon> {
    const { agent, stores, config } = await this.#current();
    return new Daemon({ agent, stores, config, clock: this.clock, log: this.log.logger });
  }

  async close() {
    this.#running?.sources.runtime.close();
    await this.node.close();
  }
}

/** An agent on a simulated node for one test, closed whatever happens. */
export async function withAgentOnNode<T>(
  options: SimNodeOptions,
  overrides: Partial<Config>,
  fn: (n: AgentOnNode) => Promise<T>,
): Promise<T> {
  const n = await AgentOnNode.start(options, overrides);
  try {
    return await fn(n);
  } finally {
    await n.close();
  }
}
