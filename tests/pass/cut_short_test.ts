/**
 * A pass cut short (Agent.pass `cut`, aborted by the daemon when the API server is lost or back
 * while a pass runs): it starts no further checkpoint write nor record, leaves them to the next
 * pass, and never holds back what it planned to stop, start or remove.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { manyParents } from "../../lib/sim/control_plane.ts";
import { API_BACK, API_LOST, ChangeFanout } from "../../lib/sources/changes.ts";
import type { PassReport } from "../../lib/pass/report.ts";
import { readStatusRecords } from "../../lib/store/status_store.ts";
import { HeapTrimmer } from "../../lib/daemon/memory.ts";
import { DaemonFixture } from "../admin/harness.ts";
import { withAgentOnNode } from "../helpers/agent_on_node.ts";
import { tree } from "../helpers/tree.ts";

const PARENTS = 3;

function aborted(): AbortSignal {
  const cut = new AbortController();
  cut.abort();
  return cut.signal;
}

/** The files under `dir`, none when it was never made. */
async function files(dir: string): Promise<string[]> {
  try {
    return Object.entries(await tree(dir)).filter(([, e]) => e.type === "file").map(([p]) => p);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return [];
    throw e;
  }
}

Deno.test("cut short: the checkpoint writes and records not started are left to the next pass, which makes them", async () => {
  await withAgentOnNode({}, {}, async (n) => {
    const config = n.config();
    const cut = await n.pass(aborted());
    assertEquals(cut.leftToNextPass, { checkpoints: PARENTS, records: PARENTS });
    assertEquals(cut.complete, false);
    assertEquals(cut.errors, []);
    assertEquals(cut.plan.stops.length, PARENTS, "the plan is the plan");
    assertEquals(await files(config.inactiveDir), []);
    assertEquals(await files(`${config.stateDir}/status`), []);
    assertEquals(n.log.find("pass cut short; the next pass does what it left").length, 1);

    const next = await n.pass();
    assertEquals(next.leftToNextPass, undefined);
    assertEquals(next.complete, true);
    assertEquals(next.applied.filter((a) => a.op === "checkpoint").length, PARENTS);
    assertEquals(
      (await files(config.inactiveDir)).filter((f) => !f.includes("/")).length,
      PARENTS,
    );
    assertEquals((await files(`${config.stateDir}/status`)).length, PARENTS);
  });
});

Deno.test("cut short: the copies the pass planned to start are started and durable all the same", async () => {
  await withAgentOnNode({}, {}, async (n) => {
    const config = n.config();
    await n.pass();
    await n.node.loseControlPlane();
    const cut = await n.pass(aborted());
    assertEquals(cut.plan.starts.length, PARENTS);
    assertEquals(cut.applied.filter((a) => a.op === "start").length, PARENTS);
    const copies = (await files(config.staticPodDir)).filter((f) => f !== "etcd.yaml");
    assertEquals(copies.length, PARENTS, copies.join(", "));
    // The records of the new states are what it left; the agent holds them, and the next pass
    // writes them.
    assertEquals(cut.leftToNextPass, { checkpoints: 0, records: PARENTS });
    const next = await n.pass();
    assertEquals(next.leftToNextPass, undefined);
    const records = await readStatusRecords(config.stateDir);
    assertEquals(records.map((r) => r.state), Array(PARENTS).fill("active"));
  });
});

/**
 * The daemon's loop, told `reason` while its first pass writes checkpoints. The heap is not
 * trimmed after the pass cut short: the pass after it follows at once.
 */
async function cutByTheDaemon(reason: string) {
  const parents = 20;
  const feed = new ChangeFanout();
  let told = false;
  const passes: PassReport[] = [];
  // The passes ended when each collection was made.
  const collectedAfter: number[] = [];
  const f = await DaemonFixture.start({}, { cluster: manyParents("cp-1", parents) }, {
    heap: new HeapTrimmer(() => collectedAfter.push(passes.length)),
    changes: feed,
    // The first checkpoint written: the others (at most 7 under way) are not started yet.
    onApplied: (action) => {
      if (told || action.op !== "checkpoint") return;
      told = true;
      feed.emit(reason);
    },
  });
  const stop = new AbortController();
  f.daemon.onPass((report) => passes.push(report));
  const looping = f.daemon.loop(stop.signal);
  try {
    for (let i = 0; i < 1_500 && !passes.some((p) => p.leftToNextPass === undefined); i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const [first] = passes;
    assert(first?.leftToNextPass, JSON.stringify(passes.map((p) => p.leftToNextPass)));
    assert(first.leftToNextPass.checkpoints >= parents - 8, JSON.stringify(first.leftToNextPass));
    const done = passes.find((p) => p.leftToNextPass === undefined);
    assert(done, "a pass after it did the rest");
    // Cut short with nothing failing: no degradation said, the pass after it does the rest.
    assertEquals(f.log.find("pass degraded"), []);
    const manifests = (await files(f.config.inactiveDir)).filter((p) => !p.includes("/"));
    assertEquals(manifests.length, parents);
    assert(!collectedAfter.includes(1), `collections after passes ${collectedAfter}`);
    assert(collectedAfter.length > 0, "the heap is trimmed after the passes that are not cut");
  } finally {
    stop.abort();
    await looping;
    await f.close();
  }
}

Deno.test("cut short: the daemon cuts the pass under way when the API server is lost, and the next pass does the rest", async () => {
  await cutByTheDaemon(API_LOST);
});

Deno.test("cut short: the daemon cuts the pass under way when the API server is back, and the next pass does the rest", async () => {
  await cutByTheDaemon(API_BACK);
});
