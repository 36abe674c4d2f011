/**
 * The real node clients with a callback when each of the three lists comes back: how the bench
 * agents time a pass's observations without changing what the agent does.
 */
import type { NodeSources } from "../lib/sources/node.ts";
import type { SourceName } from "../lib/sources/types.ts";

export function notedSources(
  connected: NodeSources,
  answered: (source: SourceName) => void,
): NodeSources {
  const noted =
    <A extends unknown[], R>(source: SourceName, call: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      const answer = await call(...args);
      answered(source);
      return answer;
    };
  return {
    apiServer: {
      ...connected.apiServer,
      listNodePods: noted("apiserver", connected.apiServer.listNodePods),
    },
    kubelet: { listPods: noted("kubelet", connected.kubelet.listPods) },
    runtime: {
      listRunningPods: noted("runtime", () => connected.runtime.listRunningPods()),
      sandboxStatus: (id) => connected.runtime.sandboxStatus(id),
      close: () => connected.runtime.close(),
    },
  };
}
