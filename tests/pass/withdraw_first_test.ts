/**
 * The copies whose parents are back are withdrawn before the pass writes any checkpoint: a copy
 * competes with its parent, and the checkpoint writes of a pass over many parents take seconds
 * (a secret and configmap fetch each, when their refresh is due).
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { Agent } from "../../lib/pass/agent.ts";
import { manyParents } from "../../lib/sim/control_plane.ts";
import { connectNode } from "../../lib/sources/node.ts";
import { AgentStores } from "../../lib/store/agent_stores.ts";
import { withAgentOnNode } from "../helpers/agent_on_node.ts";

const PARENTS = 3;

Deno.test("the API server back: every copy is withdrawn before any secret or configmap is fetched", async () => {
  await withAgentOnNode({ cluster: manyParents("cp-1", PARENTS) }, {}, async (n) => {
    await n.pass();
    await n.node.loseControlPlane();
    const activating = await n.pass();
    assertEquals(activating.applied.filter((a) => a.op === "start").length, PARENTS);
    await n.node.restoreControlPlane();

    // A new agent, as after a restart: every parent's files are due for a refresh.
    const config = n.config();
    const api = n.node.apiServer;
    const fetches = () =>
      api.requests.filter((r) => /\/(secrets|configmaps)\//.test(r.target)).length;
    const before = fetches();
    const fetchedAtStop: number[] = [];
    const sources = await connectNode(config);
    try {
      const agent = new Agent({
        config,
        sources,
        clock: n.clock,
        log: n.log.logger,
        onApplied: (action) => {
          if (action.op === "stop") fetchedAtStop.push(fetches() - before);
        },
      });
      const stores = await AgentStores.open(config.stateDir, n.log.logger);
      const report = await agent.pass(stores);
      assertEquals(report.errors, []);
      assertEquals(fetchedAtStop, Array(PARENTS).fill(0));
      assert(fetches() > before, "the pass fetched the objects after the stops");
    } finally {
      sources.runtime.close();
    }
  });
});
