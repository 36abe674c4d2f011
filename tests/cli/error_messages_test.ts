/**
 * The errors an operator meets first, through the command line: each is one line that names the
 * file (with the line and column of a configuration file), says what is wrong in words rather
 * than the runtime's (`no such file or directory`, not `(os error 2): readfile '…'`), and, where
 * it can, what to do. (A missing --config file: tests/commands/config_test.ts.)
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { runCli } from "../helpers/cli.ts";
import { withTempDir } from "../helpers/temp_dir.ts";

/** Nothing of the runtime's wrapping reaches the operator. */
function assertNoRawErrors(output: string) {
  for (const raw of ["os error", "fetch failed", "readfile", "client error (Connect)"]) {
    assert(!output.includes(raw), `${raw} in: ${output}`);
  }
}

/** A loopback port nothing listens on: taken, then given back. */
function closedPort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  listener.close();
  return listener.addr.port;
}

Deno.test("a configuration file that is not YAML: its line and column", async () => {
  await withTempDir(async (dir) => {
    const file = `${dir}/config.yaml`;
    await Deno.writeTextFile(file, "pollInterval: 5s\n  nested: x\n");
    const r = await runCli(["config", "--config", file]);
    assertEquals(r.code, 2);
    const lines = r.stderr.trimEnd().split("\n");
    assertEquals(lines.length, 1, r.stderr);
    assert(lines[0].startsWith(`ckpt-agent config: ${file}:1:15: not valid YAML: `), r.stderr);
  });
});

Deno.test("a bad setting in the file: the line and column of its value", async () => {
  await withTempDir(async (dir) => {
    const file = `${dir}/config.yaml`;
    await Deno.writeTextFile(file, "# the node's settings\npollInterval: 5s\nlogLevel:   loud\n");
    const r = await runCli(["config", "--config", file]);
    assertEquals(r.code, 2);
    assertEquals(
      r.stderr,
      `ckpt-agent config: ${file}:3:13: logLevel: must be one of debug, info, warn, error, ` +
        'not "loud"\n',
    );
  });
});

Deno.test("a missing kubeconfig: the file, the cause, and the setting to change", async () => {
  await withTempDir(async (dir) => {
    const dirs = ["static-pod-dir", "inactive-dir", "secrets-dir", "configmaps-dir", "state-dir"]
      .flatMap((flag) => [`--${flag}`, `${dir}/${flag}`]);
    const r = await runCli([
      "--once",
      "--dry-run",
      "--config",
      "/dev/null",
      "--kubeconfig",
      `${dir}/kubeconfig`,
      "--kubelet-url",
      `https://127.0.0.1:${closedPort()}`,
      "--container-runtime-endpoint",
      `unix://${dir}/runtime.sock`,
      "--log-level",
      "error",
      ...dirs,
    ]);
    assertEquals(r.code, 1, r.stderr);
    const expected =
      `apiserver: misconfigured (cannot read kubeconfig ${dir}/kubeconfig: no such file ` +
      "or directory (set kubeconfig, --kubeconfig, to the file with the agent's credentials))";
    assert(r.stdout.split("\n").includes(`  ${expected}`), r.stdout);
    assertNoRawErrors(r.stdout.split("\n").find((l) => l.includes("apiserver:"))!);
  });
});

async function statusSource(dir: string, adminListen: string): Promise<string> {
  const r = await runCli([
    "status",
    "--config",
    "/dev/null",
    "--state-dir",
    `${dir}/state`,
    "--admin-listen",
    adminListen,
  ]);
  assertEquals([r.code, r.stderr], [0, ""]);
  const [source] = r.stdout.split("\n");
  assertNoRawErrors(source);
  return source;
}

Deno.test("status with no agent says what it tried, why it failed, and what to do", async () => {
  await withTempDir(async (dir) => {
    await Deno.mkdir(`${dir}/state`);
    const prefix = `source: the state directory ${dir}/state, read-only (no agent answered at `;

    assertEquals(
      await statusSource(dir, `unix:${dir}/admin.sock`),
      `${prefix}unix:${dir}/admin.sock: no such socket; is the daemon running? ` +
        "systemctl status ckpt-agent)",
    );

    const port = closedPort();
    assertEquals(
      await statusSource(dir, `127.0.0.1:${port}`),
      `${prefix}127.0.0.1:${port}: connection refused; is the daemon running, listening there? ` +
        "systemctl status ckpt-agent)",
    );
  });
});

Deno.test("status with an agent that accepts but never answers: it may be stuck", async () => {
  await withTempDir(async (dir) => {
    await Deno.mkdir(`${dir}/state`);
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const held: Deno.Conn[] = [];
    const accepting = (async () => {
      for await (const conn of listener) held.push(conn);
    })();
    try {
      const source = await statusSource(dir, `127.0.0.1:${listener.addr.port}`);
      assert(
        source.endsWith(
          `127.0.0.1:${listener.addr.port}: no answer in 5000 ms; the agent may be stuck: ` +
            "journalctl -u ckpt-agent)",
        ),
        source,
      );
    } finally {
      listener.close();
      await accepting.catch(() => {});
      for (const conn of held) conn.close();
    }
  });
});
