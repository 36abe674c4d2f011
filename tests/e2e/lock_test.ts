/**
 * A local user against the single-agent lock, on a simulated node with the agent's real
 * commands as subprocesses: a lock file in a directory anyone can write (as the old default in
 * /run/lock was), created and flocked by uid 65534. The agent never takes that user's word that
 * another agent runs: the daemon starts and says it has no lock, `--once` activates the
 * checkpoints without it, and a verb, which cannot rule out a running agent, is refused.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { manifestFileName } from "../../lib/core/checkpoint_layout.ts";
import { createDirectHttpClient } from "../../lib/util/direct_http.ts";
import { untilAnswers } from "../helpers/admin_socket.ts";
import { runCli } from "../helpers/cli.ts";
import { withNode } from "../helpers/sim_node.ts";
import { withTempDir } from "../helpers/temp_dir.ts";
import { whileUserHolds } from "../disk/lock_holder.ts";

const PARENTS = [
  "kube-system/kube-apiserver-7x2kq",
  "kube-system/kube-controller-manager-m4t9z",
  "kube-system/kube-scheduler-q8w2c",
];
const MAIN = new URL("../../main.ts", import.meta.url).pathname;
const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

Deno.test("a local user holding the lock file's flock: the daemon runs and says so, --once activates, a verb is refused", async () => {
  await withNode(async (node) => {
    await withTempDir(async (shared) => {
      // A /run/lock of its own: root's, world-writable and sticky, reachable by the user.
      await Deno.chmod(shared, 0o755);
      await Deno.mkdir(join(shared, "lock"));
      await Deno.chmod(join(shared, "lock"), 0o1777);
      const lockFile = join(shared, "lock/ckpt-agent.lock");
      const problem = `no lock taken: the lock directory ${shared}/lock is writable by group ` +
        "or others (mode 01777)";
      const socket = join(node.root, "run/admin.sock");
      const config = await node.writeConfigFile({ lockFile, adminListen: `unix:${socket}` });
      await whileUserHolds(lockFile, async () => {
        const daemon = new Deno.Command(Deno.execPath(), {
          args: ["run", "--allow-all", "--quiet", MAIN, "run", "--config", config],
          stdout: "null",
          stderr: "piped",
        }).spawn();
        let done = false;
        const exited = daemon.output().finally(() => done = true);
        const client = createDirectHttpClient({ proxy: { transport: "unix", path: socket } });
        try {
          const ready = await Promise.race([
            untilAnswers(client, "/readyz").then((r) => r.json()),
            exited.then((out) => {
              throw new Error(`the daemon exited ${out.code}: ${decode(out.stderr)}`);
            }),
          ]);
          assert(ready.lockProblem?.startsWith(problem), JSON.stringify(ready));
        } finally {
          client.close();
          if (!done) daemon.kill("SIGTERM");
        }
        const { code, stderr } = await exited;
        const log = decode(stderr);
        assertEquals(code, 0, log);
        const error = log.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l))
          .find((l) => l.msg.startsWith("running without the single-agent lock"));
        assertEquals([error?.level, error?.lockFile], ["error", lockFile], log);

        await node.loseControlPlane();
        const once = await runCli(["--once", "--config", config]);
        assertEquals(once.code, 1, once.stderr);
        assert(once.stdout.includes(`  NO LOCK: ${problem}`), once.stdout);
        const active = [...Deno.readDirSync(node.config().staticPodDir)].map((e) => e.name);
        for (const id of PARENTS) assert(active.includes(manifestFileName(id)), `${id}: ${active}`);

        const pin = await runCli(["pin", PARENTS[1], "--config", config]);
        assertEquals(pin.code, 1, pin.stderr);
        assert(pin.stderr.includes(`${problem}`), pin.stderr);
        assert(pin.stderr.includes("a running agent cannot be ruled out"), pin.stderr);
        // The user's file is as the user left it: the agent wrote nothing into it.
        assertEquals(await Deno.readTextFile(lockFile), "");
      });
    });
  });
});
