/** Running a Deno child under strace, for tests that read the order of its system calls. */

/** Whether strace can trace here: where ptrace is not permitted (some containers), it cannot. */
export function straceRuns(): boolean {
  try {
    return new Deno.Command("strace", { args: ["-o", "/dev/null", "true"] }).outputSync().success;
  } catch {
    return false;
  }
}

/**
 * Runs `deno run --allow-all child ...args` under `strace -f -y`, tracing `syscalls` into `log`;
 * throws when the child fails, with its standard error. Returns its standard output.
 */
export async function traceChild(
  log: string,
  syscalls: string,
  child: string,
  args: string[],
): Promise<string> {
  const run = await new Deno.Command("strace", {
    args: [
      ...["-f", "-y", "-qq", "-s", "300", "-o", log],
      ...["-e", `trace=${syscalls}`],
      Deno.execPath(),
      ...["run", "--allow-all", child, ...args],
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!run.success) throw new Error(new TextDecoder().decode(run.stderr));
  return new TextDecoder().decode(run.stdout);
}
