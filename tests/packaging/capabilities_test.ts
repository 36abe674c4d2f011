/**
 * The unit's CapabilityBoundingSet= is all the agent needs: `--once` run as root with nothing
 * else (setpriv), against a simulated node, stores files for a pod's own user (chown, then chmod
 * of a file no longer root's), reads them back to compare (another's 0600 file), and takes back a
 * tree an older agent gave to a pod's user (docs/design.md#file-owners).
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { join } from "node:path";
import type { Pod } from "../../lib/core/pod.ts";
import type { PassReport } from "../../lib/pass/report.ts";
import { runCli } from "../helpers/cli.ts";
import { withNode } from "../helpers/sim_node.ts";
import { tree } from "../helpers/tree.ts";

const UNIT = new URL("../../systemd/ckpt-agent.service", import.meta.url);
const SCHEDULER = "kube-system/kube-scheduler-q8w2c";
const APISERVER_SECRET = "kube-system/kube-apiserver-7x2kq/kube-apiserver";

/** `setpriv` keeping only the unit's capabilities for what it runs. */
async function withUnitCapabilities(): Promise<string[]> {
  const line = /^CapabilityBoundingSet=(.*)$/m.exec(await Deno.readTextFile(UNIT))![1];
  const caps = line.trim().split(/\s+/).map((c) => `+${c.replace(/^CAP_/, "").toLowerCase()}`);
  return ["setpriv", `--bounding-set=-all,${caps.join(",")}`, "--inh-caps=-all"];
}

Deno.test("with only the unit's capabilities, --once stores a pod's files for its user and takes back an older agent's tree", async () => {
  await withNode(async (node, configFile) => {
    await node.updateParent(SCHEDULER, (pod: Pod) => {
      (pod.spec as Record<string, unknown>).securityContext = { runAsUser: 1000 };
      return pod;
    });
    const c = node.config();
    // As an older agent left a volume: the pod's user's, 0700, its file 0600.
    const legacy = join(c.secretsDir, APISERVER_SECRET);
    await Deno.mkdir(legacy, { recursive: true, mode: 0o700 });
    await Deno.writeTextFile(join(legacy, "apiserver.key"), "old", { mode: 0o600 });
    for (const path of [legacy, join(legacy, "apiserver.key")]) {
      await Deno.chown(path, 65534, 65534);
    }
    const wrapper = await withUnitCapabilities();
    // Twice: the second pass reads back what the first wrote for the pod's user.
    for (let run = 0; run < 2; run++) {
      const once = await runCli(["--once", "--config", configFile, "--output", "json"], {
        wrapper,
      });
      const report = JSON.parse(once.stdout) as PassReport;
      assertEquals([once.code, report.errors], [0, []], once.stderr);
    }
    const scheduler = await tree(join(c.secretsDir, SCHEDULER));
    const files = Object.values(scheduler).filter((e) => e.type === "file");
    assertEquals(files.length > 0, true);
    for (const file of files) assertEquals([file.uid, file.mode], [1000, 0o600]);
    const taken = await Deno.lstat(legacy);
    assertEquals([taken.uid, taken.gid, taken.mode! & 0o7777], [0, 65534, 0o750]);
  });
});
