/**
 * Temp files an interrupted write or activation left in the manifest directories (a crash
 * between link or write and rename) are removed before a new agent's first write; nobody
 * else's dot-files are touched.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { join } from "node:path";
import { tempPathFor } from "../../lib/disk/atomic_write.ts";
import { pathExists } from "../../lib/disk/dirs.ts";
import { withAgentOnNode } from "../helpers/agent_on_node.ts";

Deno.test("leftover temp files in both manifest dirs are swept before the first write", async () => {
  await withAgentOnNode({}, {}, async (n) => {
    const c = n.config();
    await Deno.mkdir(c.inactiveDir, { mode: 0o700 });
    const leftovers = [
      tempPathFor(join(c.staticPodDir, "kube-system-kube-apiserver-7x2kq.json")),
      tempPathFor(join(c.inactiveDir, "kube-system-kube-scheduler-q8w2c.json")),
    ];
    for (const path of leftovers) await Deno.writeTextFile(path, "{");
    const theirs = join(c.staticPodDir, ".kube-proxy.yaml.swp");
    await Deno.writeTextFile(theirs, "an editor's");

    assertEquals((await n.pass()).errors, []);
    for (const path of leftovers) assertEquals(await pathExists(path), false, path);
    assertEquals(await Deno.readTextFile(theirs), "an editor's");
    assertEquals(
      n.log.find("leftover temp files removed").map((l) => l.dir),
      [c.staticPodDir, c.inactiveDir],
    );
    // Once per process: a running agent's own temp files are never in the way.
    await n.pass();
    assertEquals(n.log.find("leftover temp files removed").length, 2);
  });
});
