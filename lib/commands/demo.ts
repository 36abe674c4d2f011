/**
 * `ckpt-agent demo`: the real agent against a simulated control-plane node, through a scripted
 * outage and recovery, then a bad rollout and its rollback (lib/demo/story.ts), told step by step
 * or printed as one JSON document.
 * Exit 0 only when every step's expectations held. It ends by itself, and the simulated node's
 * servers and directory are gone before it exits, also on Ctrl-C or SIGTERM.
 */
import { commandOptions, commandOutput } from "../cli/commands.ts";
import { CommandError, EXIT_FAILURE, EXIT_OK, SIGNAL_EXIT, UsageError } from "../cli/errors.ts";
import { parseFlags } from "../config/flags.ts";
import { narrateEnd, narrateStart, narrateStep } from "../demo/narrate.ts";
import { type DemoResult, runDemo } from "../demo/run.ts";

/** The story takes about two seconds; far beyond that, something hangs and the demo gives up. */
const DEADLINE_MS = 60_000;

const encoder = new TextEncoder();

function write(text: string) {
  try {
    Deno.stdout.writeSync(encoder.encode(text));
  } catch (e) {
    // `ckpt-agent demo | head`: once the reader is gone the story still ends, and cleans up.
    if (!(e instanceof Deno.errors.BrokenPipe)) throw e;
  }
}

/** Waits for a line (or the end) of standard input; throws when `signal` aborts first. */
async function nextLine(signal: AbortSignal): Promise<void> {
  signal.throwIfAborted();
  const reader = Deno.stdin.readable.getReader();
  let onAbort = () => {};
  const aborted = new Promise<void>((resolve) => onAbort = resolve);
  signal.addEventListener("abort", onAbort, { once: true });
  const line = (async () => {
    const decoder = new TextDecoder();
    while (true) {
      const { value, done } = await reader.read();
      if (done || decoder.decode(value).includes("\n")) return;
    }
  })();
  try {
    await Promise.race([line, aborted]);
  } finally {
    signal.removeEventListener("abort", onAbort);
    // A read still pending fails here, and is of no interest any more.
    line.catch(() => {});
    reader.releaseLock();
  }
  signal.throwIfAborted();
}

export async function demoCommand(args: string[]): Promise<number> {
  const { values } = parseFlags(args, commandOptions("demo"));
  const output = commandOutput("demo", values);
  const pause = values.pause === true;
  if (pause && output === "json") throw new UsageError("--pause: only with --output text");

  const stop = new AbortController();
  let caught: Deno.Signal | undefined;
  const handlers = Object.keys(SIGNAL_EXIT).map((name) => {
    const signal = name as Deno.Signal;
    const handler = () => {
      caught ??= signal;
      stop.abort(new Error(`interrupted by ${signal}`));
    };
    Deno.addSignalListener(signal, handler);
    return { signal, handler };
  });
  // A reader may take all the time they want; an unattended run may not.
  const deadline = pause ? undefined : setTimeout(
    () => stop.abort(new Error(`the story took longer than ${DEADLINE_MS / 1000} s`)),
    DEADLINE_MS,
  );

  let result: DemoResult;
  try {
    result = await runDemo({
      signal: stop.signal,
      onStart(node) {
        if (output === "text") write(narrateStart(node) + "\n");
      },
      async onStep(step, index, total) {
        if (output !== "text") return;
        write(narrateStep(step, index, total) + "\n");
        if (pause && index < total - 1) {
          write("Press Enter for the next step (Ctrl-C ends the demo).\n");
          await nextLine(stop.signal);
        }
      },
    });
  } catch (e) {
    throw new CommandError(
      `could not start the simulated node: ${(e as Error).message}`,
      EXIT_FAILURE,
    );
  } finally {
    clearTimeout(deadline);
    for (const { signal, handler } of handlers) Deno.removeSignalListener(signal, handler);
  }

  if (output === "json") write(JSON.stringify(result, null, 2) + "\n");
  else write(narrateEnd(result) + "\n");
  // A signal after the last step interrupted nothing.
  if (caught && result.stopped) return SIGNAL_EXIT[caught]!;
  return result.ok ? EXIT_OK : EXIT_FAILURE;
}
