/**
 * The compiled binary's permission set (scripts/permissions.ts), kept honest: the agent runs
 * from source with exactly those flags against a simulated node — a pass, a dry run, a
 * snapshot, the daemon, verify, config — so a permission that goes missing fails here, not on a
 * production node. And each flag is needed: without it, something the agent must do fails.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { dirname, join } from "node:path";
import denoJson from "../../deno.json" with { type: "json" };
import type { DoctorReport } from "../../lib/doctor/finding.ts";
import type { PassReport } from "../../lib/pass/report.ts";
import { isValidParent, podId } from "../../lib/core/pod.ts";
import { AGENT_PERMISSIONS, agentDenoFlags } from "../../scripts/permissions.ts";
import { createSimCa, writeKubeconfig } from "../../lib/sim/pki.ts";
import type { SimNode } from "../../lib/sim/node.ts";
import { createDirectHttpClient, UNIX_SOCKET_ORIGIN } from "../../lib/util/direct_http.ts";
import { runCli } from "../helpers/cli.ts";
import { withTempDir } from "../helpers/temp_dir.ts";
import { untilStatusRecords, withNode } from "../helpers/sim_node.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

function strict(args: string[], env: Record<string, string> = {}) {
  return runCli(args, { denoFlags: agentDenoFlags(), env });
}

function without(flag: string): string[] {
  return agentDenoFlags().filter((f) => f !== flag);
}

Deno.test("deno task demo and agent-strict run with exactly the compiled binary's flags", () => {
  const flags = agentDenoFlags().join(" ");
  assertEquals(denoJson.tasks.demo, `deno run ${flags} main.ts demo`);
  assertEquals(denoJson.tasks["agent-strict"], `deno run ${flags} main.ts`);
});

Deno.test("docs/building.md's table of permissions lists exactly the binary's flags", async () => {
  const doc = await Deno.readTextFile(new URL("../../docs/building.md", import.meta.url));
  const section = doc.split("## The permissions, and why each is needed")[1].split("\n#")[0];
  const listed = [...section.matchAll(/^\| `(--[^`]+)`/gm)].map((m) => m[1]);
  assertEquals(listed.sort(), ["--no-prompt", ...AGENT_PERMISSIONS.map((p) => p.flag)].sort());
});

Deno.test("with the compiled permissions: a pass, a dry run, a snapshot, verify", async () => {
  await withNode(async (node, configFile) => {
    const config = ["--config", configFile];
    const dry = await strict(["--once", "--dry-run", "--output", "json", ...config]);
    assertEquals(dry.code, 0, dry.stderr);

    const once = await strict(["--once", "--output", "json", ...config]);
    assertEquals(once.code, 0, once.stderr);
    const report: PassReport = JSON.parse(once.stdout);
    assert(report.complete);
    assertEquals(report.errors, []);
    const parents = node.parents.filter(isValidParent).map(podId).sort();
    assertEquals(Object.keys(report.plan.state), parents);
    assert(report.applied.some((a) => a.op === "files"), "secrets and configmaps were written");

    const snapshot = await strict(["snapshot", ...config]);
    assertEquals(snapshot.code, 0, snapshot.stderr);
    assertEquals(JSON.parse(snapshot.stdout).apiAvailable, true);

    const verify = await strict(["verify", "--state-dir", node.config().stateDir]);
    assertEquals(verify.code, 0, verify.stdout + verify.stderr);
  });
});

Deno.test("with the compiled permissions: the daemon passes until SIGTERM", async () => {
  await withNode(async (node, configFile) => {
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", ...agentDenoFlags(), "--quiet", MAIN, "run", "--config", configFile],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).spawn();
    const stderr = new Response(child.stderr).text();
    const stdout = new Response(child.stdout).text();
    const records = await untilStatusRecords(node, 3);
    child.kill("SIGTERM");
    const status = await child.status;
    const log = await stderr;
    await stdout;
    assertEquals(records, 3, log);
    assertEquals(status.code, 0, log);
    assert(!log.includes("NotCapable") && !log.includes("Requires"), log);
  });
});

Deno.test("with the compiled permissions: doctor measures the room, and says what /proc hides from it", async () => {
  await withNode(async (_node, configFile) => {
    const run = await strict(["doctor", "--output", "json", "--config", configFile]);
    const report: DoctorReport = JSON.parse(run.stdout);
    // Warnings: the directories a first pass makes are missing, no unit is installed, and /proc
    // cannot be read for the running kubelet.
    assertEquals([run.code, report.level, run.stderr], [1, "warning", ""]);
    const finding = (check: string) => report.findings.find((f) => f.check === check)!;
    assertEquals(finding("disk-room").level, "ok");
    const kubelet = finding("static-pod-dir").found;
    assert(kubelet.includes("permissions do not cover /proc"), kubelet);
    // The mounts are told without /proc, by the kernel's answer to a rename that changes nothing.
    assertEquals(finding("mount").level, "ok", finding("mount").found);

    // statfs is what the room needs.
    const denoFlags = agentDenoFlags().map((f) =>
      f.startsWith("--allow-sys=") ? "--allow-sys=hostname,uid" : f
    );
    const without = await runCli(["doctor", "--output", "json", "--config", configFile], {
      denoFlags,
    });
    const room = (JSON.parse(without.stdout) as DoctorReport).findings
      .find((f) => f.check === "disk-room")!;
    assertEquals(room.level, "warning");
    assert(room.found.includes('Requires sys access to "statfs"'), room.found);
  });
});

Deno.test("with the compiled permissions: the node name defaults to the host name", async () => {
  await withTempDir(async (dir) => {
    const file = join(dir, "config.yaml");
    await Deno.writeTextFile(file, "{}\n");
    const run = await strict(["config", "--config", file], { NODE_NAME: "" });
    assertEquals(run.code, 0, run.stderr);
    assert(run.stdout.includes(`nodeName: ${Deno.hostname().trim().toLowerCase()}`), run.stdout);
  });
});

Deno.test("every permission is needed: without it the agent fails", async (t) => {
  await withNode(async (_node, configFile) => {
    await withTempDir(async (dir) => {
      const empty = join(dir, "config.yaml");
      await Deno.writeTextFile(empty, "{}\n");
      for (const { flag } of AGENT_PERMISSIONS) {
        await t.step(flag, async () => {
          // Only the node name's default needs the host name; every other flag, any pass.
          const args = flag.startsWith("--allow-sys")
            ? ["config", "--config", empty]
            : ["--once", "--output", "json", "--config", configFile];
          const run = await runCli(args, { denoFlags: without(flag), env: { NODE_NAME: "" } });
          assert(run.code !== 0, `succeeded without ${flag}`);
          assert(
            /NotCapable|Requires \w+ access/.test(run.stdout + run.stderr),
            run.stdout + run.stderr,
          );
        });
      }
    });
  });
});

/**
 * The node's kubeconfig without a CA, and its kubelet (serving a certificate of the cluster's
 * CA) asked without kubeletCaFile: both are verified with the system's roots. `roots`: a PEM
 * file the test makes the system's roots, through SSL_CERT_FILE, which Deno's system store reads
 * (DENO_TLS_CA_STORE=system, main.ts's default).
 */
async function withoutCa(
  fn: (node: SimNode, configFile: string, roots: string) => Promise<void>,
): Promise<void> {
  await withNode(async (node) => {
    const dir = join(node.root, "no-ca");
    await Deno.mkdir(dir);
    const client = await node.ca.issueClientCert({
      commonName: `system:node:${node.nodeName}`,
      organizations: ["system:nodes"],
    });
    const kubeconfig = await writeKubeconfig(dir, {
      server: node.apiServer.url,
      client,
      embed: "files",
    });
    const configFile = await node.writeConfigFile({ kubeconfig, kubeletCaFile: undefined });
    const roots = join(dir, "roots.pem");
    await Deno.writeTextFile(roots, node.ca.certPem);
    await fn(node, configFile, roots);
  }, { kubeletServingByClusterCa: true });
}

/**
 * NODE_EXTRA_CA_CERTS set, as on many hosts: Deno's https.Agent then lists the root certificates
 * in JavaScript, which asks sys access to "ca"; it names a CA that signed nothing here, so it
 * cannot be what verifies the servers.
 */
async function unrelatedExtraCa(dir: string): Promise<string> {
  const file = join(dir, "unrelated-ca.pem");
  await Deno.writeTextFile(file, (await createSimCa("unrelated")).certPem);
  return file;
}

Deno.test("with the compiled permissions and a kubeconfig without a CA: the API server and the kubelet are verified with the system's roots", async () => {
  await withoutCa(async (_node, configFile, roots) => {
    const extra = await unrelatedExtraCa(dirname(roots));
    const once = (systemRoots: string) =>
      strict(["--once", "--output", "json", "--config", configFile], {
        SSL_CERT_FILE: systemRoots,
        NODE_EXTRA_CA_CERTS: extra,
      });
    const run = await once(roots);
    assertEquals(run.code, 0, run.stderr);
    const report: PassReport = JSON.parse(run.stdout);
    assertEquals([report.complete, report.failures, report.errors], [true, [], []]);
    // The kubelet verified, not fallen back to asking it unverified.
    assert(!run.stderr.includes("unverified"), run.stderr);

    // The control: with other system roots, neither server verifies (the kubelet is then asked
    // unverified, with the client certificate only).
    const other = await once(extra);
    const failures = (JSON.parse(other.stdout) as PassReport).failures;
    assertEquals(failures.map((f) => [f.source, f.kind]), [["apiserver", "unreachable"]]);
    assert(failures[0].message.includes("certificate"), failures[0].message);
    assert(other.stderr.includes("could not be verified against the system's roots"));
    assert(!other.stderr.includes("Requires"), other.stderr);
  });
});

/** Admin endpoint answers over the daemon's unix socket; bounded: 300 tries. */
async function untilMetric(client: Deno.HttpClient, line: RegExp): Promise<string> {
  let text = "";
  for (let i = 0; i < 300 && !line.test(text); i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    text = await fetch(`${UNIX_SOCKET_ORIGIN}/metrics`, { client })
      .then((r) => r.text(), () => "");
  }
  return text;
}

Deno.test("a permission the agent runs without is its own failure: said with the flag, counted, not ready, and never taken for an outage", async () => {
  await withNode(async (node, configFile) => {
    const config = ["--config", configFile];
    const first = await strict(["--once", ...config]);
    assertEquals(first.code, 0, first.stderr);
    // The control plane dies: etcd gone, the API server answering 503, every pod stopped. An
    // agent that may ask the API server activates the checkpoints; one that may not must not.
    await node.loseControlPlane("etcd-gone");
    const staticPodDir = node.config().staticPodDir;
    const manifests = () => Array.from(Deno.readDirSync(staticPodDir), (e) => e.name).sort();
    const before = manifests();
    const api = new URL(node.apiServer.url).host;
    const denied = [...agentDenoFlags(), `--deny-net=${api}`];
    const flag = "--allow-net";

    const once = await runCli(["--once", ...config], { denoFlags: denied });
    assertEquals(once.code, 1, once.stderr);
    const said = once.stderr.split("\n").filter((l) => l.includes("permission missing"));
    assertEquals(said.length, 1, once.stderr);
    assert(said[0].includes(`net access to \\"${api}\\": run with ${flag}`), said[0]);

    const doctor = await runCli(["doctor", "--output", "json", ...config], { denoFlags: denied });
    const finding = (JSON.parse(doctor.stdout) as DoctorReport).findings
      .find((f) => f.check === "source" && f.subject === "apiserver")!;
    assertEquals(finding.level, "error");
    assert(finding.found.includes("not an outage"), finding.found);
    assert(finding.fix!.includes(flag), finding.fix);

    const socket = join(node.root, "run/admin.sock");
    const daemonConfig = await node.writeConfigFile({ adminListen: `unix:${socket}` });
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", ...denied, "--quiet", MAIN, "run", "--config", daemonConfig],
      stdin: "null",
      stdout: "null",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).spawn();
    const stderr = new Response(child.stderr).text();
    const client = createDirectHttpClient({ proxy: { transport: "unix", path: socket } });
    try {
      const metrics = await untilMetric(
        client,
        /^ckpt_agent_permission_errors_total\{where="apiserver"\} [1-9]/m,
      );
      assert(/^ckpt_agent_permission_errors_total\{where="apiserver"\} [1-9]/m.test(metrics));
      const ready = await fetch(`${UNIX_SOCKET_ORIGIN}/readyz`, { client });
      const body = await ready.json();
      assertEquals(ready.status, 503);
      const reasons = body.notReady as { reason: string; message: string }[];
      const permission = reasons.find((r) => r.reason === "permission");
      assert(permission?.message.includes(flag), JSON.stringify(reasons));
    } finally {
      client.close();
      child.kill("SIGTERM");
    }
    await child.status;
    const log = await stderr;
    const errors = log.split("\n").filter((l) => l.includes("permission missing"));
    assertEquals(errors.length, 1, log);
    assert(errors[0].includes('"level":"error"'), errors[0]);
    // Held: nothing activated.
    assertEquals(manifests(), before);

    // The control: allowed to ask, the agent takes the 503s for the outage they are.
    const outage = await strict(["--once", "--output", "json", ...config]);
    const started = (JSON.parse(outage.stdout) as PassReport).applied.filter((a) =>
      a.op === "start"
    );
    assert(started.length > 0, outage.stdout);
    assert(manifests().length > before.length);
  });
});
