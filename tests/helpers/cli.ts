/** Runs ckpt-agent as a subprocess, exactly as an operator would through `deno run`. */

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export async function runCli(
  args: string[],
  options: {
    stdin?: string;
    env?: Record<string, string>;
    /** Permission flags for `deno run`; default: all permissions. */
    denoFlags?: string[];
    /** A command that runs `deno` in turn (`setpriv` and its flags). */
    wrapper?: string[];
    /** Kills the command when it aborts: the bound on a command that should have ended. */
    signal?: AbortSignal;
  } = {},
): Promise<CliResult> {
  const deno = [
    Deno.execPath(),
    "run",
    ...(options.denoFlags ?? ["--allow-all"]),
    "--quiet",
    MAIN,
    ...args,
  ];
  const [command, ...rest] = [...options.wrapper ?? [], ...deno];
  const child = new Deno.Command(command, {
    args: rest,
    stdin: options.stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1", ...options.env },
    signal: options.signal,
  }).spawn();
  if (options.stdin !== undefined) {
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(options.stdin));
    await writer.close();
  }
  const out = await child.output();
  const decode = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: decode(out.stdout), stderr: decode(out.stderr) };
}
