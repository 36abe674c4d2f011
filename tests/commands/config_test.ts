/** `ckpt-agent config` as a subprocess: what an operator runs to check a file before a restart. */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { parse } from "yaml";
import { runCli } from "../helpers/cli.ts";
import { withTempDir } from "../helpers/temp_dir.ts";

Deno.test("prints the effective configuration as YAML that loads back", async () => {
  await withTempDir(async (dir) => {
    const file = `${dir}/config.yaml`;
    await Deno.writeTextFile(file, "pollInterval: 90s\nnamespace: [kube-system]\nnodeName: cp-1\n");
    const r = await runCli(["config", "--config", file, "--checkpoint-grace-period", "0"], {
      env: { POD_NAME: "ckpt-cp-1", POD_NAMESPACE: "kube-system", NODE_NAME: "cp-1" },
    });
    assertEquals(r.stderr, "");
    assertEquals(r.code, 0);
    const lines = r.stdout.split("\n");
    assertEquals(lines[0], `# ckpt-agent effective configuration: defaults, ${file}, flags`);
    assertEquals(lines[1], "# self (from POD_NAMESPACE, POD_NAME, NODE_NAME): kube-system/ckpt");
    const printed = parse(r.stdout);
    assertEquals(printed.pollInterval, "1m30s");
    assertEquals(printed.checkpointGracePeriod, "0s");
    assertEquals(printed.namespace, ["kube-system"]);
    assertEquals(printed.nodeName, "cp-1");
    assertEquals(printed.adminListen, "127.0.0.1:10280");

    // The output is a configuration file of its own, giving the same output.
    await Deno.writeTextFile(`${dir}/printed.yaml`, r.stdout);
    const again = await runCli(["config", "--config", `${dir}/printed.yaml`]);
    assertEquals(again.code, 0);
    assertEquals(again.stdout.split("\n").slice(1), lines.slice(2));
  });
});

Deno.test("a bad configuration exits 2 with one line naming the key", async () => {
  await withTempDir(async (dir) => {
    const file = `${dir}/config.yaml`;
    await Deno.writeTextFile(file, "pollInterval: 5\n");
    const r = await runCli(["config", "--config", file]);
    assertEquals(r.code, 2);
    assertEquals(r.stdout, "");
    assertEquals(
      r.stderr,
      `ckpt-agent config: ${file}:1:15: pollInterval: 5 has no unit (seconds? milliseconds?); write e.g. "5s"\n`,
    );

    await Deno.writeTextFile(`${dir}/empty.yaml`, "");
    const flag = await runCli(["config", "--config", `${dir}/empty.yaml`, "--admin-listen", "x"]);
    assertEquals(flag.code, 2);
    assertEquals(
      flag.stderr,
      'ckpt-agent config: --admin-listen: "x" is not one of host:port, [ipv6]:port, unix:/path or off\n',
    );

    const missing = await runCli(["config", "--config", `${dir}/absent.yaml`]);
    assertEquals(missing.code, 2);
    assert(
      missing.stderr ===
        `ckpt-agent config: --config: cannot read ${dir}/absent.yaml: no such file or directory\n`,
      missing.stderr,
    );
  });
});
