/**
 * What the agent makes of failing sources, on a simulated node: each problem logged once (new
 * at warn, repeats at debug, recovery at info), a configuration problem logged with the line it
 * needs, and a refresh that stops asking an API server that stopped answering.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { Agent } from "../../lib/pass/agent.ts";
import type { Config } from "../../lib/config/types.ts";
import { connectNode, type NodeSources } from "../../lib/sources/node.ts";
import { manyParents } from "../../lib/sim/control_plane.ts";
import { SimNode, type SimNodeOptions } from "../../lib/sim/node.ts";
import type { PeerFault } from "../../lib/sim/peer.ts";
import { writeKubeconfig } from "../../lib/sim/pki.ts";
import { AgentStores } from "../../lib/store/agent_stores.ts";
import { LogCapture, ManualClock } from "../admin/harness.ts";

interface Fixture {
  node: SimNode;
  sources: NodeSources;
  log: LogCapture;
  pass(): ReturnType<Agent["pass"]>;
}

async function withAgent(
  options: {
    node?: SimNodeOptions;
    config?: (node: SimNode) => Promise<Partial<Config>>;
    wrap?: (sources: NodeSources, node: SimNode) => NodeSources;
  },
  fn: (f: Fixture) => Promise<void>,
) {
  const node = await SimNode.start(options.node);
  let sources: NodeSources | undefined;
  try {
    const config = node.config(await options.config?.(node));
    const log = new LogCapture();
    // Files as old as a running node's: the clients are built once, not again while they settle.
    const connected = await connectNode(config, {
      log: log.logger,
      now: () => Date.now() + 3_600_000,
    });
    sources = options.wrap?.(connected, node) ?? connected;
    const stores = await AgentStores.open(config.stateDir, log.logger);
    const clock = new ManualClock();
    const agent = new Agent({ config, sources, clock, log: log.logger });
    await fn({
      node,
      sources,
      log,
      pass: () => {
        clock.advance(1_000);
        return agent.pass(stores);
      },
    });
  } finally {
    sources?.runtime.close();
    await node.close();
  }
}

/** The lines about sources logged since `from`, as [level, msg, source]. */
function sourceLines(log: LogCapture, from: number) {
  return log.lines.slice(from)
    .filter((l) => l.source !== undefined)
    .map((l) => [l.level, l.msg, l.source]);
}

Deno.test("a source problem is said once at warn, at debug while it lasts, and its end at info", async () => {
  await withAgent({}, async ({ node, log, pass }) => {
    await pass();
    const answers: [PeerFault, string[][]][] = [
      ["html", [["warn", "source unavailable", "apiserver"]]],
      ["html", [["debug", "source unavailable", "apiserver"]]],
      ["html", [["debug", "source unavailable", "apiserver"]]],
      // Another problem is new again.
      ["wrong-kind", [["warn", "source unavailable", "apiserver"]]],
      ["truncated", [["warn", "source unavailable", "apiserver"]]],
      ["none", [["info", "source answers again", "apiserver"]]],
      ["none", []],
      // After a pass without it, the same problem is news again.
      ["html", [["warn", "source unavailable", "apiserver"]]],
    ];
    for (const [fault, expected] of answers) {
      node.apiServer.setFault(fault);
      const from = log.lines.length;
      const report = await pass();
      assertEquals([fault, sourceLines(log, from)], [fault, expected]);
      assertEquals(report.complete, fault === "none");
    }
    // The warning quotes the start of what came back.
    const warned = log.find("source unavailable").at(-1)!;
    assert(
      String(warned.error).includes(
        'body is not JSON (content-type text/html; charset=utf-8): "<!DOCTYPE html>\\n<html>',
      ),
      String(warned.error),
    );
  });
});

Deno.test("a token kubeconfig and a self-signed kubelet: the error names kubeletCaFile, not RBAC", async () => {
  const config = async (node: SimNode): Promise<Partial<Config>> => {
    node.apiServer.acceptTokens(["node-token"]);
    node.kubelet.secure.acceptTokens(["node-token"]);
    const dir = join(node.root, "etc/kubernetes/token");
    await Deno.mkdir(dir);
    const kubeconfig = await writeKubeconfig(dir, {
      server: node.apiServer.url,
      caPem: node.apiServer.caPem,
      token: "node-token",
      embed: "inline",
    });
    return { kubeconfig, kubeletCaFile: undefined };
  };
  await withAgent({ config }, async ({ node, log, pass }) => {
    const first = await pass();
    assertEquals(first.failures.map((f) => [f.source, f.kind]), [["kubelet", "misconfigured"]]);
    const errors = log.lines.filter((l) => l.level === "error");
    assertEquals(errors.map((l) => l.msg), [
      "source not asked: fix the configuration the error names",
    ]);
    const error = String(errors[0].error);
    assert(error.includes("so the bearer token was not sent"), error);
    assert(error.includes("set kubeletCaFile"), error);
    assertEquals(log.find("credentials refused: check the kubeconfig and RBAC"), []);
    assertEquals(node.kubelet.secure.requests, []);
    // During an outage it is still the configuration's fault, and still said once.
    await node.loseControlPlane();
    await pass();
    assertEquals(log.lines.filter((l) => l.level === "error").length, 1);
  });
});

Deno.test("a kubeadm kubelet (self-signed) with the default kubeletCaFile: answered, and said once", async () => {
  await withAgent(
    { config: () => Promise.resolve({ kubeletCaFile: undefined }) },
    async ({ node, log, pass }) => {
      for (let i = 0; i < 3; i++) assertEquals((await pass()).complete, true);
      const said = log.lines.filter((l) => l.level === "warn");
      assertEquals(said.length, 1);
      assert(String(said[0].msg).includes("not signed by the cluster CA"), String(said[0].msg));
      assertEquals(
        node.kubelet.secure.requests.map((r) => [r.authenticatedAs, r.bearerToken]),
        Array(3).fill([`cert:system:node:${node.nodeName}`, undefined]),
      );
    },
  );
});

Deno.test("an API server that hangs mid-refresh is asked once per fetch in flight, not once per object", async () => {
  const objectGets = (node: SimNode) =>
    node.apiServer.requests.filter((r) => r.target.startsWith("/api/v1/namespaces/")).length;
  await withAgent({
    node: { cluster: manyParents("cp-1", 40) },
    config: () => Promise.resolve({ apiTimeoutMs: 1_000 }),
    // The API server lists the pods, then stops answering: a refresh is under way when it hangs.
    wrap: (sources, node) => {
      let listed = 0;
      return {
        ...sources,
        apiServer: {
          ...sources.apiServer,
          listNodePods: async (nodeName) => {
            const pods = await sources.apiServer.listNodePods(nodeName);
            if (listed++ === 0) node.apiServer.setFault("hang");
            return pods;
          },
        },
      };
    },
  }, async ({ node, log, pass }) => {
    const report = await pass();
    // 40 parents, each with two secrets and two configmaps: 160 objects. Eight checkpoints are
    // worked on at once, and each asks one object at a time, so at most eight were asked.
    const asked = objectGets(node);
    assert(asked >= 1 && asked <= 8, `${asked} objects asked of a hung API server`);
    assertEquals(report.failures, []);
    const said = log.find("source unavailable").map((l) => l.level);
    assertEquals(said, ["warn", ...Array(asked - 1).fill("debug")]);

    // The next pass asks again for what was not fetched.
    node.apiServer.setFault("none");
    const before = objectGets(node);
    await pass();
    assertEquals(objectGets(node) - before, 160);
  });
});
