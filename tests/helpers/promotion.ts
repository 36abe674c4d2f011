/**
 * How the end-to-end promotion tests run time on a simulated node: a pass every poll interval,
 * the kubelet acting every second between, and when a promotion was first logged.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { asArray, type Json } from "../../lib/core/json.ts";
import type { Pod } from "../../lib/core/pod.ts";
import type { AgentOnNode } from "./agent_on_node.ts";

export const POLL_MS = 5_000;

export function containerOf(pod: Pod): Json {
  return asArray((pod.spec as Json).containers)[0];
}

/**
 * Passes every poll interval for `ms` of both clocks; the kubelet acts every second between.
 * `n`: an agent on a node, or a daemon on one (tests/admin/harness.ts).
 */
export async function runFor(
  n: Pick<AgentOnNode, "clock" | "node" | "pass">,
  ms: number,
  each?: (atMs: number) => void,
) {
  for (let at = POLL_MS; at <= ms; at += POLL_MS) {
    n.clock.advance(POLL_MS);
    await n.node.advance(POLL_MS);
    const report = await n.pass();
    assertEquals(report.errors, []);
    each?.(at);
  }
}

/** Passes for two minutes after a change; when the first promotion was logged, if one was. */
export async function promotionTime(n: AgentOnNode): Promise<number | undefined> {
  const before = n.log.find("candidate promoted").length;
  let promotedAtMs: number | undefined;
  await runFor(n, 120_000, (at) => {
    if (promotedAtMs === undefined && n.log.find("candidate promoted").length > before) {
      promotedAtMs = at;
    }
  });
  return promotedAtMs;
}

export async function readPod(path: string): Promise<Pod> {
  return JSON.parse(await Deno.readTextFile(path));
}
