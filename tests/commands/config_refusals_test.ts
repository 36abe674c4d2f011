/**
 * One validation for every command that takes the configuration: a setting `run` refuses,
 * `config`, `--once`, `--once --dry-run`, `doctor` and the rest refuse too, with the same line
 * and exit 2, before anything starts. As subprocesses, as an operator runs them.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { join } from "node:path";
import { type CommandName, COMMANDS } from "../../lib/cli/commands.ts";
import { mapConcurrent } from "../../lib/util/map_concurrent.ts";
import { runCli } from "../helpers/cli.ts";
import { withTempDir } from "../helpers/temp_dir.ts";

/** Far beyond a refusal; a daemon that was not refused is killed then, and the test fails. */
const BOUND_MS = 60_000;

interface BadSetting {
  /** The settings file's content; empty when the flags or the environment are what is bad. */
  file?: string;
  args?: string[];
  env?: Record<string, string>;
  /** The refusal, after `ckpt-agent COMMAND: `; `file` is the settings file's path. */
  line: (file: string) => string;
}

const NOT_LOOPBACK = "is not a loopback address; binding it needs adminAllowRemote " +
  "(--admin-allow-remote)";

const BAD: BadSetting[] = [
  {
    args: ["--admin-listen", "0.0.0.0:10381"],
    line: () => `--admin-listen: "0.0.0.0:10381" ${NOT_LOOPBACK}`,
  },
  {
    file: 'adminListen: "[::]:10280"\n',
    line: (file) => `${file}: adminListen: "[::]:10280" ${NOT_LOOPBACK}`,
  },
  {
    args: ["--secrets-dir", "/srv/same", "--configmaps-dir", "/srv/same"],
    line: () => "--configmaps-dir: /srv/same is also --secrets-dir",
  },
  {
    file: "pollInterval: 5\n",
    line: (file) =>
      `${file}:1:15: pollInterval: 5 has no unit (seconds? milliseconds?); write e.g. "5s"`,
  },
  {
    file: "pollIntervall: 5s\n",
    line: (file) => `${file}:1:16: pollIntervall: unknown key (did you mean pollInterval?)`,
  },
  {
    args: ["--admin-listen", "x"],
    line: () => '--admin-listen: "x" is not one of host:port, [ipv6]:port, unix:/path or off',
  },
  {
    args: ["--checkpoint-versions", "0"],
    line: () => "--checkpoint-versions: 0 is not between 1 and 100",
  },
  {
    env: { NODE_NAME: "Not_A_Node" },
    line: () => 'NODE_NAME: "Not_A_Node" is not a valid node name (lowercase DNS subdomain)',
  },
];

/** Every path the agent would use, in `dir`: should a command not refuse, it touches nothing else. */
function nodeArgs(dir: string): string[] {
  const at = (name: string) => join(dir, name);
  return [
    ["--kubeconfig", at("kubeconfig")],
    ["--lock-file", at("lock")],
    ["--container-runtime-endpoint", `unix://${at("cri.sock")}`],
    ["--static-pod-dir", at("manifests")],
    ["--inactive-dir", at("inactive")],
    ["--secrets-dir", at("secrets")],
    ["--configmaps-dir", at("configmaps")],
    ["--state-dir", at("state")],
    ["--admin-token-file", at("token")],
  ].flat();
}

/** The command line of a command that takes the configuration: a verb names a checkpoint. */
function commandLine(name: CommandName): string[] {
  return COMMANDS[name].synopsis.startsWith("NAMESPACE/NAME") ? [name, "kube-system/x"] : [name];
}

interface Refusal {
  command: string;
  code: number;
  stdout: string;
  stderr: string;
}

async function refusals(commands: string[][], bad: BadSetting): Promise<[Refusal[], Refusal[]]> {
  return await withTempDir(async (dir) => {
    const file = join(dir, "config.yaml");
    await Deno.writeTextFile(file, bad.file ?? "");
    const signal = AbortSignal.timeout(BOUND_MS);
    const got = await mapConcurrent(commands, 4, async (command) => {
      const r = await runCli(
        [...command, "--config", file, ...nodeArgs(dir), ...bad.args ?? []],
        { env: { NODE_NAME: "cp-1", ...bad.env }, signal },
      );
      return { command: command.join(" "), code: r.code, stdout: r.stdout, stderr: r.stderr };
    });
    // Nothing started: no lock taken, no directory made.
    assertEquals([...Deno.readDirSync(dir)].map((e) => e.name), ["config.yaml"]);
    const want = commands.map((command) => ({
      command: command.join(" "),
      code: 2,
      stdout: "",
      stderr: `ckpt-agent ${command[0]}: ${bad.line(file)}\n`,
    }));
    return [got, want];
  });
}

Deno.test("config, run, --once, --once --dry-run and doctor refuse each bad setting with the same line", async () => {
  const commands = [["config"], ["run"], ["run", "--once"], ["run", "--once", "--dry-run"], [
    "doctor",
  ]];
  for (const bad of BAD) {
    const [got, want] = await refusals(commands, bad);
    assertEquals(got, want);
  }
});

Deno.test("every command that takes the configuration refuses what run refuses", async () => {
  const names = (Object.keys(COMMANDS) as CommandName[]).filter((name) => COMMANDS[name].config);
  const [got, want] = await refusals(names.map(commandLine), BAD[0]);
  assertEquals(got, want);
});
