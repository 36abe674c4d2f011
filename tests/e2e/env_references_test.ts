/**
 * A parent whose containers take environment from secrets or configmaps: its checkpoint keeps the
 * references (a static pod cannot resolve them without the API server), the daemon says so once,
 * and `verify` names the manifest, so a runbook does not trust a checkpoint that cannot start.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { controlPlane } from "../../lib/sim/control_plane.ts";
import { DaemonFixture } from "../admin/harness.ts";
import { runCli } from "../helpers/cli.ts";

const CONTROLLER = "kube-system/kube-controller-manager-m4t9z";
const WARNING = "the checkpoint cannot be an exact copy of its parent";
const UNREADABLE = "which a static pod cannot read while the API server is down (and a kubelet " +
  "from 1.34 refuses it outright)";

function clusterWithSecretEnv() {
  const cluster = controlPlane("cp-1");
  const pod = cluster.pods.find((p) =>
    `${p.metadata.namespace}/${p.metadata.name}` === CONTROLLER
  )!;
  const spec = pod.spec as { containers: { env?: unknown[] }[] };
  spec.containers[0].env = [
    { name: "CLOUD_TOKEN", valueFrom: { secretKeyRef: { name: "cloud", key: "token" } } },
  ];
  return cluster;
}

Deno.test("environment from a secret: said once by the daemon, named by verify", async () => {
  const f = await DaemonFixture.start({}, { cluster: clusterWithSecretEnv() });
  try {
    const reference =
      `container kube-controller-manager: env CLOUD_TOKEN comes from secret cloud (key token), ${UNREADABLE}`;
    await f.pass();
    assertEquals(
      f.log.find(WARNING).map((line) => [line.id, line.warnings]),
      [[CONTROLLER, [reference]]],
    );
    // A later pass, and a refresh that makes the checkpoint again: nothing new to say.
    await f.pass();
    f.clock.advance(f.config.refreshIntervalMs);
    await f.pass();
    assertEquals(f.log.find(WARNING).length, 1);

    const verify = await runCli(["verify", "--config", await f.node.writeConfigFile(), "--json"]);
    assertEquals(verify.code, 1);
    const manifest = join(f.config.inactiveDir, "kube-system-kube-controller-manager-m4t9z.json");
    assertEquals(JSON.parse(verify.stdout).findings, [{
      file: manifest,
      problem: `cannot start without the API server: ${reference}`,
    }]);
    // The reference is kept as it was: no secret value in the manifest.
    const kept = JSON.parse(await Deno.readTextFile(manifest));
    assert(JSON.stringify(kept.spec.containers[0].env).includes('"secretKeyRef"'));
  } finally {
    await f.close();
  }
});
