/** A simulated node for one test, with its config file written, closed whatever happens. */
import { SimNode } from "../../lib/sim/node.ts";

export async function withNode(
  fn: (node: SimNode, configFile: string) => Promise<void>,
): Promise<void> {
  const node = await SimNode.start();
  try {
    await fn(node, await node.writeConfigFile());
  } finally {
    await node.close();
  }
}
