/**
 * Crash tests' children: a script run in a process of its own that says `ready` when it is
 * about to do what the test cuts, and `done` after; the test kills it with SIGKILL anywhere
 * between.
 */
import { ok as assert } from "node:assert/strict";

/**
 * `script` with `args` in a child process, killed at a random moment within `killWithinMs` of
 * its saying `ready` (never, when undefined); whether it said `done`, and how long it took
 * from `ready` to `done`.
 */
export async function runChild(
  script: string,
  args: string[],
  killWithinMs?: number,
): Promise<{ finished: boolean; out: string; passMs: number }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", "--quiet", script, ...args],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let out = "";
  let markReady!: () => void;
  const ready = new Promise<void>((resolve) => markReady = resolve);
  let readyAt = 0, doneAt = 0;
  const reading = (async () => {
    for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
      out += chunk;
      if (out.includes("ready\n") && readyAt === 0) {
        readyAt = performance.now();
        markReady();
      }
      if (out.includes("done ") && doneAt === 0) doneAt = performance.now();
    }
  })();
  const stderr = new Response(child.stderr).text();
  const first = await Promise.race([ready.then(() => "ready"), child.status.then(() => "exited")]);
  if (first === "ready" && killWithinMs !== undefined) {
    await new Promise((resolve) => setTimeout(resolve, Math.random() * killWithinMs));
    try {
      child.kill("SIGKILL");
    } catch {
      // Finished already.
    }
  }
  await child.status;
  await reading;
  assert(out.includes("ready\n"), `the child never got ready: ${await stderr}`);
  return { finished: out.includes("done "), out, passMs: doneAt - readyAt };
}
