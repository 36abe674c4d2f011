/**
 * The purge crash test's child: `purge --force` of one checkpoint on disk, as the command runs
 * it with no agent (runVerb on stores opened from the state dir). It prints `ready` once the
 * stores are open and `done purged` after the purge (`done absent` when there was nothing to
 * purge); the test kills it anywhere between.
 */
import { loadConfig } from "../../lib/config/load.ts";
import { systemClock } from "../../lib/core/time.ts";
import { runVerb, VerbError } from "../../lib/pass/verbs.ts";
import { AgentStores } from "../../lib/store/agent_stores.ts";
import { silentLogger } from "../../lib/util/log.ts";

const [configFile, id] = Deno.args;
const { config } = await loadConfig(["--config", configFile]);
const stores = await AgentStores.open(config.stateDir, silentLogger);
const say = (line: string) => Deno.stdout.writeSync(new TextEncoder().encode(`${line}\n`));
say("ready");
try {
  await runVerb(
    config,
    stores,
    { verb: "purge", id, force: true },
    systemClock.now(),
    silentLogger,
  );
  say("done purged");
} catch (e) {
  if (!(e instanceof VerbError) || e.status !== 404) throw e;
  say("done absent");
}
