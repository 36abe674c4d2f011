/**
 * `--output json`, and its alias `--json`, on every command that prints a result: one JSON
 * document of a stable shape on standard output, whichever spelling asked for it. As
 * subprocesses on a simulated node, as a script runs them.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { COMMANDS, type OutputCommand } from "../../lib/cli/commands.ts";
import { asArray, type Json } from "../../lib/core/json.ts";
import { SimNode } from "../../lib/sim/node.ts";
import { type CliResult, runCli } from "../helpers/cli.ts";

const ID = "kube-system/kube-controller-manager-m4t9z";
const SCHEDULER = "kube-system/kube-scheduler-q8w2c";

/** A document's top-level keys; a key ending in `?` may be absent. */
type Shape = string[];

const PLAN: Shape = ["starts", "stops", "removes", "state"];
const VERB: Shape = ["source", "verb", "id", "changed", "rolledBack?", "message", "versions?"];

/**
 * For each command, in the order they run on the node, and the shape of what each prints: the
 * record's type makes a command that prints a result and has no line here a type error.
 */
const SHAPES: Record<OutputCommand, Shape> = {
  run: [
    "startedAt",
    "durationMs",
    "complete",
    "failures",
    "plan",
    "crashLooping",
    "changes",
    "applied",
    "errors",
    "bytesWritten",
    "stalledStarts",
    "leftToNextPass?",
  ],
  snapshot: [
    "now",
    "gracePeriodSeconds",
    "self?",
    "namespaces?",
    "apiAvailable",
    "runtimeAvailable",
    "kubeletAvailable",
    "kubeletVerified",
    "localRunning",
    "crashLooping?",
    "superseded?",
    "localParents",
    "apiParents",
    "activeCheckpoints",
    "inactiveCheckpoints",
    "state",
  ],
  plan: PLAN,
  status: ["source", "stateDir", "why", "checkpoints"],
  pin: VERB,
  unpin: VERB,
  rollback: VERB,
  purge: VERB,
  config: ["file", "self", "settings"],
  verify: ["stateDir", "checked", "findings", "sound"],
  doctor: ["level", "counts", "findings"],
  demo: ["ok", "node", "steps", "stopped?", "leftBehind"],
  version: ["version", "deno", "commit"],
};

function assertShape(what: string, document: unknown, shape: Shape) {
  assert(typeof document === "object" && document !== null && !Array.isArray(document), what);
  const keys = Object.keys(document);
  const allowed = shape.map((key) => key.replace(/\?$/, ""));
  const required = shape.filter((key) => !key.endsWith("?"));
  assertEquals(
    [what, keys.filter((key) => !allowed.includes(key)), required.filter((k) => !keys.includes(k))],
    [what, [], []],
  );
}

/** Standard output is one JSON document and nothing else. */
function parsed(what: string, r: CliResult): unknown {
  try {
    return JSON.parse(r.stdout);
  } catch (e) {
    throw new Error(`${what}: not one JSON document (${(e as Error).message}): ${r.stdout}`);
  }
}

function pushFlag(flag: string) {
  return (pod: { spec?: Json }) => {
    (asArray((pod.spec as Json).containers)[0].command as string[]).push(flag);
    return pod as never;
  };
}

Deno.test("every command that prints a result: --output json and --json print one JSON document of its shape", async () => {
  const node = await SimNode.start();
  try {
    // promoteAfter 0: each new spec of a parent is a new version at once, for `rollback`.
    const config = await node.writeConfigFile({ promoteAfterMs: 0 });
    const cli = (name: OutputCommand, args: string[], stdin?: string) =>
      runCli([...args, ...(COMMANDS[name].config ? ["--config", config] : [])], {
        ...(stdin === undefined ? {} : { stdin }),
      });
    const seen = new Set<OutputCommand>();

    /** A read-only command: both spellings, the same shape (and the same code). */
    const both = async (
      name: OutputCommand,
      args: string[],
      opts: { codes?: number[]; stdin?: string; shape?: Shape } = {},
    ) => {
      const long = await cli(name, [...args, "--output", "json"], opts.stdin);
      const alias = await cli(name, [...args, "--json"], opts.stdin);
      for (const [spelling, r] of [["--output json", long], ["--json", alias]] as const) {
        const what = `${args.join(" ")} ${spelling}`;
        assert((opts.codes ?? [0]).includes(r.code), `${what}: exit ${r.code}: ${r.stderr}`);
        assertShape(what, parsed(what, r), opts.shape ?? SHAPES[name]);
      }
      assertEquals(alias.code, long.code);
      seen.add(name);
      return long;
    };
    /** A command that changes something: one spelling. */
    const once = async (name: OutputCommand, args: string[]) => {
      const r = await cli(name, args);
      const what = args.join(" ");
      assertEquals(r.code, 0, `${what}: ${r.stderr}`);
      assertShape(what, parsed(what, r), SHAPES[name]);
      seen.add(name);
      return r;
    };

    // A dry run prints the plan, as `plan` does.
    await both("run", ["--once", "--dry-run"], { shape: PLAN });
    const snapshot = await both("snapshot", ["snapshot"]);
    await both("plan", ["plan", "--snapshot", "-"], { stdin: snapshot.stdout });
    await once("run", ["--once", "--output", "json"]);
    await node.updateParent(ID, pushFlag("--v=2"));
    await once("run", ["--once", "--json"]);
    await both("status", ["status"]);
    await once("pin", ["pin", ID, "--output", "json"]);
    await once("unpin", ["unpin", ID, "--json"]);
    await once("rollback", ["rollback", ID, "--output", "json"]);
    await once("purge", ["purge", SCHEDULER, "--json"]);
    await both("config", ["config"]);
    await both("verify", ["verify"]);
    // The simulated node is not a whole host (no systemd unit): warnings and errors are expected.
    await both("doctor", ["doctor"], { codes: [0, 1, 2] });
    await both("version", ["version"]);
    await both("demo", ["demo"]);

    const outputCommands = Object.keys(COMMANDS).filter((name) =>
      "output" in COMMANDS[name as OutputCommand]
    );
    assertEquals([...seen].sort(), outputCommands.sort());
  } finally {
    await node.close();
  }
});

Deno.test("--json is --output json, and refused beside another format", async () => {
  const text = await runCli(["version", "--json", "--output", "text"]);
  assertEquals(
    [text.code, text.stdout, text.stderr],
    [2, "", "ckpt-agent version: --json: the same as --output json, not with --output text\n"],
  );
  const other = await runCli(["version", "--output", "yaml"]);
  assertEquals(
    [other.code, other.stderr],
    [2, 'ckpt-agent version: --output: must be text or json, not "yaml"\n'],
  );
  // A command whose only format is JSON takes the flags, and refuses text.
  const plan = await runCli(["plan", "--snapshot", "-", "--output", "text"], { stdin: "{}" });
  assertEquals(
    [plan.code, plan.stderr],
    [2, 'ckpt-agent plan: --output: must be json, not "text"\n'],
  );
});
