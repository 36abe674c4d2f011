/**
 * `ckpt-agent snapshot`: the live observations in exactly the format `plan --snapshot` reads, so
 * `ckpt-agent snapshot | ckpt-agent plan --snapshot -` gives what `--once --dry-run` gives.
 * Writes nothing.
 */
import { Agent } from "../pass/agent.ts";
import { trackedFromDisk } from "../pass/observe.ts";
import { commandOptions, commandOutput } from "../cli/commands.ts";
import { loadConfig } from "../config/load.ts";
import { snapshotDocument } from "../core/snapshot.ts";
import { systemClock } from "../core/time.ts";
import { jsonText } from "../util/json_text.ts";
import { stderrLogger } from "../util/log.ts";
import { connectNode } from "../sources/node.ts";

export async function snapshotCommand(args: string[]): Promise<number> {
  const { config, extra } = await loadConfig(args, { extraFlags: commandOptions("snapshot") });
  // JSON is its only format; the flag is checked, as every command checks it.
  commandOutput("snapshot", extra);
  const sources = await connectNode(config);
  try {
    const agent = new Agent({
      config,
      sources,
      clock: systemClock,
      log: await stderrLogger(config),
    });
    const observation = await agent.observe(trackedFromDisk(config.stateDir));
    // Any pod of the node is in it, however deep it nests.
    console.log(jsonText(snapshotDocument(observation.input), 2));
    return 0;
  } finally {
    sources.runtime.close();
  }
}
