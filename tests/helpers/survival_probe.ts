/** Runs a probe that must survive what it does in a process of its own: a crash there fails the
 *  test that runs it, not the whole test run. */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { fileURLToPath } from "node:url";

/** Runs `probe` with `args`; it must exit 0 and print "survived <times>". */
export async function assertSurvives(probe: URL, args: string[], times: string): Promise<void> {
  const config = fileURLToPath(new URL("../../deno.json", import.meta.url));
  const { code, signal, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", "--config", config, fileURLToPath(probe), ...args],
    stdin: "null",
  }).output();
  const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes).trim();
  assert(
    code === 0,
    `the probe died (exit ${code}, signal ${signal}):\n${text(stderr).slice(-2_000)}`,
  );
  assertEquals(text(stdout), `survived ${times}`);
}
