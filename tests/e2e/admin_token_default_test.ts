/**
 * The admin token where install.sh and the Debian package put it, which is where the agent and the
 * verbs look when no setting says otherwise: an agent started with no token refuses a verb naming
 * the file and the setting (in its log at warn, and in the command's error); once install.sh has
 * made the token, the verb with no flag but --config goes through the agent. The agent and the
 * commands run in a mount namespace of their own whose /etc is this machine's under an overlay,
 * so that the real default path, /etc/ckpt-agent/admin-token, is used without touching this
 * machine's /etc.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { stringify as toYaml } from "yaml";
import { configAsYamlSettings, defaultConfig } from "../../lib/config/load.ts";
import { SimNode } from "../../lib/sim/node.ts";
import { createDirectHttpClient } from "../../lib/util/direct_http.ts";
import { untilAnswers } from "../helpers/admin_socket.ts";
import { runCli } from "../helpers/cli.ts";
import { withTempDir } from "../helpers/temp_dir.ts";
import { INSTALL_SH, run } from "../packaging/tools.ts";

const ID = "kube-system/kube-controller-manager-m4t9z";
const MAIN = new URL("../../main.ts", import.meta.url).pathname;
const TOKEN_FILE = defaultConfig("cp-1").adminTokenFile;
/** Runs the command after it with /etc overlaid by $UPPER, in a new mount namespace. */
const OVERLAID_ETC = [
  "unshare",
  "--mount",
  "--propagation",
  "private",
  "--",
  "sh",
  "-c",
  'mount -t overlay overlay -o "lowerdir=/etc,upperdir=$UPPER,workdir=$WORK" /etc && exec "$@"',
  "sh",
];

/** Why /etc cannot be overlaid here (no root, no overlayfs), or undefined when it can. */
async function probe(): Promise<string | undefined> {
  if (Deno.uid() !== 0) return "not root";
  return await withTempDir(async (dir) => {
    const env = await overlayDirs(dir);
    const r = await run(OVERLAID_ETC[0], [...OVERLAID_ETC.slice(1), "true"], { env })
      .catch((e) => ({ code: 1, stderr: (e as Error).message }));
    return r.code === 0 ? undefined : r.stderr.trim();
  });
}

async function overlayDirs(dir: string): Promise<{ UPPER: string; WORK: string }> {
  const env = { UPPER: join(dir, "etc-upper"), WORK: join(dir, "etc-work") };
  await Deno.mkdir(env.UPPER);
  await Deno.mkdir(env.WORK);
  return env;
}

const UNAVAILABLE = await probe();
if (UNAVAILABLE) console.error(`the default admin token test is skipped: ${UNAVAILABLE}`);

Deno.test({
  name:
    "the default token file: refused naming the file and the setting, then made by install.sh, the verb needs no flag",
  ignore: UNAVAILABLE !== undefined,
  fn: async () => {
    assertEquals(TOKEN_FILE, "/etc/ckpt-agent/admin-token");
    const hostToken = await Deno.lstat(TOKEN_FILE).catch(() => undefined);
    const node = await SimNode.start();
    try {
      const env = await overlayDirs(node.root);
      const socket = join(node.root, "run/admin.sock");
      // The node's settings, but for the token file: the default.
      const settings = configAsYamlSettings(node.config({ adminListen: `unix:${socket}` }));
      delete settings.adminTokenFile;
      const config = join(node.root, "etc/ckpt-agent/config.yaml");
      await Deno.writeTextFile(config, toYaml(settings));

      const agent = new Deno.Command(OVERLAID_ETC[0], {
        args: [
          ...OVERLAID_ETC.slice(1),
          Deno.execPath(),
          "run",
          "--allow-all",
          "--quiet",
          MAIN,
          "run",
          "--config",
          config,
        ],
        env,
        stdout: "null",
        stderr: "piped",
      }).spawn();
      // unshare and sh exec the agent: its pid is the namespace's.
      const inAgentNamespace = ["nsenter", `--target=${agent.pid}`, "--mount", "--"];
      const client = createDirectHttpClient({ proxy: { transport: "unix", path: socket } });
      let stderr = "";
      try {
        await (await untilAnswers(client, "/readyz")).body?.cancel();
        const cli = (...args: string[]) =>
          runCli([...args, "--config", config], { wrapper: inAgentNamespace });

        const refused = await cli("pin", ID);
        assertEquals(refused.code, 1, refused.stderr);
        const fix =
          `set adminTokenFile (--admin-token-file) to a token file, or make ${TOKEN_FILE}`;
        assert(refused.stderr.includes(`no token file at ${TOKEN_FILE}; ${fix}`), refused.stderr);
        assertEquals(refused.stderr.trim().split("\n").length, 1, refused.stderr);

        const made = await run(inAgentNamespace[0], [
          ...inAgentNamespace.slice(1),
          INSTALL_SH,
          "--root",
          "/",
          "--admin-token",
        ]);
        assertEquals(made.stdout, `created    ${TOKEN_FILE}\nckpt-agent: 1 change(s)\n`);
        assertEquals(made.code, 0, made.stderr);
        const pin = await cli("pin", ID);
        assertEquals(pin.code, 0, pin.stderr);
        assert(pin.stdout.includes(`source: the running agent at unix:${socket}`), pin.stdout);
        assert(pin.stdout.includes(`${ID}: pinned`), pin.stdout);

        // A command that cannot read the token the agent asks for says which file and setting.
        const elsewhere = join(node.root, "no-such-token");
        const unread = await runCli(
          ["unpin", ID, "--config", config, "--admin-token-file", elsewhere],
          { wrapper: inAgentNamespace },
        );
        assertEquals(unread.code, 1, unread.stderr);
        assert(
          unread.stderr.includes(
            `needs its admin token, and ${elsewhere} does not exist; set adminTokenFile ` +
              "(--admin-token-file)",
          ),
          unread.stderr,
        );
      } finally {
        client.close();
        agent.kill("SIGTERM");
        stderr = new TextDecoder().decode((await agent.output()).stderr);
      }
      // The agent said it once, at start, at warn, with the file and the setting.
      const lines = stderr.split("\n").filter((l) => l.includes("mutating requests"));
      assertEquals(lines.length, 2, stderr);
      const [disabled, enabled] = lines.map((l) => JSON.parse(l));
      assertEquals([disabled.level, disabled.msg, disabled.tokenFile, disabled.reason], [
        "warn",
        "admin: mutating requests disabled",
        TOKEN_FILE,
        `no token file at ${TOKEN_FILE}`,
      ]);
      assert(disabled.fix.startsWith("set adminTokenFile (--admin-token-file)"), disabled.fix);
      assertEquals([enabled.level, enabled.msg], ["info", "admin: mutating requests enabled"]);
      // Nothing reached this machine's /etc.
      assertEquals(await Deno.lstat(TOKEN_FILE).catch(() => undefined), hostToken);
    } finally {
      await node.close();
    }
  },
});
