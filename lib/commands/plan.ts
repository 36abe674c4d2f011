/** `ckpt-agent plan --snapshot FILE|-`: one planning pass over a recorded snapshot. */
import { commandOptions, commandOutput } from "../cli/commands.ts";
import { UsageError } from "../cli/errors.ts";
import { parseFlags } from "../config/flags.ts";
import { runPass } from "../core/pass.ts";
import { parseSnapshot, planDocument, SnapshotError } from "../core/snapshot.ts";

async function readSource(path: string): Promise<string> {
  try {
    return path === "-"
      ? await new Response(Deno.stdin.readable).text()
      : await Deno.readTextFile(path);
  } catch (e) {
    throw new UsageError(`--snapshot: cannot read ${path}: ${(e as Error).message}`);
  }
}

export async function planCommand(args: string[]): Promise<number> {
  const { values } = parseFlags(args, commandOptions("plan"));
  // JSON is its only format; the flag is checked, as every command checks it.
  commandOutput("plan", values);
  if (values.snapshot === undefined) {
    throw new UsageError("--snapshot: required (a file, or - for standard input)");
  }
  const text = await readSource(values.snapshot);
  let input;
  try {
    input = parseSnapshot(text);
  } catch (e) {
    if (e instanceof SnapshotError) throw new UsageError(e.message);
    throw e;
  }
  console.log(JSON.stringify(planDocument(runPass(input))));
  return 0;
}
