/**
 * The promotion crash test's child: the real agent on the node its configuration names, one
 * pass. It prints `ready` once connected and `done` after the pass; the test kills it anywhere
 * between.
 */
import { loadConfig } from "../../lib/config/load.ts";
import { systemClock } from "../../lib/core/time.ts";
import { Agent } from "../../lib/pass/agent.ts";
import { connectNode } from "../../lib/sources/node.ts";
import { AgentStores } from "../../lib/store/agent_stores.ts";
import { silentLogger } from "../../lib/util/log.ts";

const { config } = await loadConfig(["--config", Deno.args[0]]);
const sources = await connectNode(config);
const stores = await AgentStores.open(config.stateDir, silentLogger);
const agent = new Agent({ config, sources, clock: systemClock, log: silentLogger });
const say = (line: string) => Deno.stdout.writeSync(new TextEncoder().encode(`${line}\n`));
say("ready");
const report = await agent.pass(stores);
say(`done ${JSON.stringify(report.errors)}`);
sources.runtime.close();
