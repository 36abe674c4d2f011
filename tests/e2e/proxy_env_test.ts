/**
 * The agent in the proxy environments nodes give it, as a subprocess with each environment: the
 * runtime over its unix socket (simulated and real containerd), `ckpt-agent status` against a
 * running agent (TCP on 127.0.0.1 and [::1], and a unix socket), and `ckpt-agent --once`
 * against a simulated node — none of which may go through a proxy. Then the API server through
 * a real proxy, by a name only the proxy resolves.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import type { PassReport } from "../../lib/pass/report.ts";
import type { ListenAddress } from "../../lib/admin/listen.ts";
import { type AdminServer, startAdminServer } from "../../lib/admin/server.ts";
import { CriSimServer } from "../../lib/sim/cri_server.ts";
import { SIM_API_SERVER_NAME } from "../../lib/sim/apiserver.ts";
import { writeKubeconfig } from "../../lib/sim/pki.ts";
import type { SimNode } from "../../lib/sim/node.ts";
import { DaemonFixture } from "../admin/harness.ts";
import { runCli } from "../helpers/cli.ts";
import { firstAnswer, withContainerd } from "../helpers/containerd.ts";
import { DEAD_PROXY, PROXY_ENVIRONMENTS } from "../helpers/proxy_env.ts";
import { startHttpProxy } from "../helpers/proxy_servers.ts";
import { withNode } from "../helpers/sim_node.ts";
import { connectRuntime } from "../../lib/sources/cri.ts";
import { manifestTree } from "../helpers/tree.ts";

const PROBE = fileURLToPath(new URL("./cri_probe.ts", import.meta.url));
const ENVIRONMENTS = Object.entries(PROXY_ENVIRONMENTS);

interface ProbeAnswer {
  listed: { ok: boolean; value?: { name: string }[]; failure?: { message: string } };
  plain: string;
}

async function probe(endpoint: string, env: Record<string, string>): Promise<ProbeAnswer> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", "--quiet", PROBE, endpoint],
    env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  assert(out.success, `probe failed: ${new TextDecoder().decode(out.stderr)}`);
  return JSON.parse(text);
}

async function assertRuntimeAnswers(endpoint: string, expected: string[]) {
  // Concurrently: each is its own process.
  const answers = await Promise.all(ENVIRONMENTS.map(([, env]) => probe(endpoint, env)));
  for (const [i, [name]] of ENVIRONMENTS.entries()) {
    const { listed } = answers[i];
    assertEquals(
      [name, listed.ok, listed.value?.map((p) => p.name), listed.failure?.message],
      [name, true, expected, undefined],
    );
  }
  // What the proxy variables do to a client built the plain way: the reason for the above.
  const plain = answers[0].plain;
  assert(plain.includes("tcp connect error"), `NO_PROXY no longer breaks a unix socket: ${plain}`);
}

Deno.test("the CRI client reaches the simulated runtime in every proxy environment", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cri-env-" });
  const runtime = await CriSimServer.start({ socketPath: join(dir, "runtime.sock") });
  try {
    runtime.setPods([{
      namespace: "kube-system",
      name: "etcd",
      uid: "u1",
      ready: true,
      containers: [{ name: "etcd", state: "running" }],
    }]);
    await assertRuntimeAnswers(runtime.endpoint, ["etcd"]);
  } finally {
    await runtime.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the CRI client reaches a real containerd in every proxy environment", async () => {
  await withContainerd(async (containerd) => {
    const client = connectRuntime(containerd.endpoint, 5_000);
    try {
      await firstAnswer(client, containerd);
    } finally {
      client.close();
    }
    await assertRuntimeAnswers(containerd.endpoint, []);
  });
});

Deno.test("ckpt-agent status reaches the running agent over TCP and its socket in every proxy environment", async () => {
  const f = await DaemonFixture.start();
  const servers: AdminServer[] = [];
  try {
    await f.pass();
    const listens: Exclude<ListenAddress, { kind: "off" }>[] = [
      { kind: "tcp", hostname: "127.0.0.1", port: 0 },
      { kind: "tcp", hostname: "::1", port: 0 },
      { kind: "unix", path: join(f.node.root, "run/admin.sock") },
    ];
    for (const listen of listens) {
      servers.push(
        await startAdminServer({ daemon: f.daemon, listen, clock: f.clock, log: f.log.logger }),
      );
    }
    for (const server of servers) {
      const config = await f.node.writeConfigFile({ adminListen: server.address });
      const runs = await Promise.all(
        ENVIRONMENTS.map(([, env]) => runCli(["status", "--config", config], { env })),
      );
      for (const [i, [name]] of ENVIRONMENTS.entries()) {
        const r = runs[i];
        assertEquals(
          [server.address, name, r.code, r.stdout.split("\n")[0]],
          [server.address, name, 0, `source: the running agent at ${server.address}`],
          r.stderr,
        );
      }
    }
  } finally {
    for (const server of servers) await server.close();
    await f.close();
  }
});

async function once(configFile: string, env: Record<string, string>) {
  const r = await runCli(["--once", "--config", configFile, "--output", "json"], { env });
  assert(r.stdout.trim() !== "", `no report; exit ${r.code}; stderr: ${r.stderr}`);
  return { code: r.code, report: JSON.parse(r.stdout) as PassReport, stderr: r.stderr };
}

async function inactiveManifests(node: SimNode): Promise<string[]> {
  return Object.keys(await manifestTree(node.config().inactiveDir)).sort();
}

Deno.test("ckpt-agent --once in every proxy environment: every source answers, checkpoints written", async () => {
  for (const [name, env] of ENVIRONMENTS) {
    await withNode(async (node, configFile) => {
      const r = await once(configFile, env);
      assertEquals([name, r.code, r.report.failures], [name, 0, []], r.stderr);
      assertEquals([name, (await inactiveManifests(node)).length], [name, 3]);
      assertEquals(r.report.errors, []);
    });
  }
});

Deno.test("ckpt-agent --once reaches an API server named in the kubeconfig through HTTPS_PROXY", async () => {
  await withNode(async (node) => {
    const proxy = await startHttpProxy({ hosts: { [SIM_API_SERVER_NAME]: "127.0.0.1" } });
    try {
      const dir = join(node.root, "etc/kubernetes/by-name");
      await Deno.mkdir(dir);
      const kubeconfig = await writeKubeconfig(dir, {
        server: `https://${SIM_API_SERVER_NAME}:${node.apiServer.port}`,
        caPem: node.apiServer.caPem,
        client: await clientOf(node),
        embed: "inline",
      });
      const configFile = await node.writeConfigFile({ kubeconfig });
      const env = {
        HTTPS_PROXY: proxy.url,
        NO_PROXY: "127.0.0.1,localhost",
        HTTP_PROXY: DEAD_PROXY,
      };
      const r = await once(configFile, env);
      assertEquals([r.code, r.report.failures], [0, []], r.stderr);
      assertEquals((await inactiveManifests(node)).length, 3);
      // The pod list and every secret and configmap, each through its own tunnel. (`deno run`
      // itself may ask the proxy for dl.deno.land, its update check: not the agent's doing.)
      const tunnels = () =>
        proxy.requests.filter((p) =>
          p.method === "CONNECT" && p.target === `${SIM_API_SERVER_NAME}:${node.apiServer.port}`
        ).length;
      const asked = node.apiServer.requests.length;
      assert(asked > 1);
      assertEquals(tunnels(), asked);

      // NO_PROXY naming it: asked directly, the name resolves nowhere, the API server is
      // unavailable (and the runtime and kubelet still answer).
      const direct = await once(configFile, { ...env, NO_PROXY: `.ckpt.test` });
      assertEquals(direct.code, 1);
      assertEquals(direct.report.failures.map((f) => [f.source, f.kind]), [
        ["apiserver", "unreachable"],
      ]);
      assertEquals(tunnels(), asked);
    } finally {
      await proxy.close();
    }
  });
});

/** The node's client certificate and key, as its kubeconfig names them. */
async function clientOf(node: SimNode) {
  const dir = join(node.root, "etc/kubernetes");
  return {
    certPem: await Deno.readTextFile(join(dir, "client.crt")),
    keyPem: await Deno.readTextFile(join(dir, "client.key")),
  };
}
