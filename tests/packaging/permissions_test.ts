/**
 * The compiled binary's permission set (scripts/permissions.ts), kept honest: the agent runs
 * from source with exactly those flags against a simulated node — a pass, a dry run, a
 * snapshot, the daemon, verify, config — so a permission that goes missing fails here, not on a
 * production node. And each flag is needed: without it, something the agent must do fails.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import denoJson from "../../deno.json" with { type: "json" };
import type { DoctorReport } from "../../lib/doctor/finding.ts";
import type { PassReport } from "../../lib/pass/report.ts";
import { isValidParent, podId } from "../../lib/core/pod.ts";
import { AGENT_PERMISSIONS, agentDenoFlags } from "../../scripts/permissions.ts";
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
