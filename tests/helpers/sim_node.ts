/** A simulated node for one test, with its config file written, closed whatever happens. */
import { join } from "node:path";
import { SimNode, type SimNodeOptions } from "../../lib/sim/node.ts";

export async function withNode(
  fn: (node: SimNode, configFile: string) => Promise<void>,
  options?: SimNodeOptions,
): Promise<void> {
  const node = await SimNode.start(options);
  try {
    await fn(node, await node.writeConfigFile());
  } finally {
    await node.close();
  }
}

/**
 * Waits until the agent's state dir holds `count` status records, as a daemon's first pass
 * writes one per parent; returns how many there are. Bounded: 15 s at the most.
 */
export async function untilStatusRecords(node: SimNode, count: number): Promise<number> {
  const statusDir = join(node.config().stateDir, "status");
  let records = 0;
  for (let i = 0; i < 300 && records < count; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    records = (await Array.fromAsync(Deno.readDir(statusDir)).catch(() => [])).length;
  }
  return records;
}
