/**
 * A second process for the lock tests, as another agent or as a local user racing the agent:
 * - `lock_holder.ts PATH`: an agent: takes the lock at PATH and prints `acquired <pid>` (then
 *   holds it until killed or stdin closes), `held <pid>`, or `no lock: <problem>`.
 * - `lock_holder.ts --flock PATH`: what any local user can do to a lock file: open it as it is
 *   (following links, creating it where the user may, read-only where the user may only read),
 *   flock it and print `flocked <pid>` (or `busy`), holding it until stdin closes.
 * `startHolder` runs it; with `{ user: true }` as uid and gid 65534 with no groups (setpriv).
 * `whileUserHolds` has that user hold a lock file's flock while a test runs.
 */
import { acquireLock, isLock } from "../../lib/disk/lock.ts";

export const USER = 65534;
/** setpriv's arguments that run a command as the unprivileged USER. */
const AS_USER = [`--reuid=${USER}`, `--regid=${USER}`, "--clear-groups"];
const HOLDER = new URL(import.meta.url).pathname;

export interface Holder {
  child: Deno.ChildProcess;
  /** The first line the holder printed. */
  line: string;
  /** Lets the holder go and waits for it; its exit code. */
  stop(): Promise<number>;
}

export async function startHolder(
  args: string[],
  options: { user?: boolean } = {},
): Promise<Holder> {
  const deno = [Deno.execPath(), "run", "--allow-all", "--quiet", HOLDER, ...args];
  const [command, ...rest] = options.user ? ["setpriv", ...AS_USER, ...deno] : deno;
  const child = new Deno.Command(command, {
    args: rest,
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  let line = "";
  const lines = child.stdout.pipeThrough(new TextDecoderStream());
  for await (const chunk of lines) {
    line += chunk;
    if (line.includes("\n")) break;
  }
  return {
    child,
    line: line.trimEnd(),
    async stop() {
      await child.stdin.close().catch(() => {});
      return (await child.status).code;
    },
  };
}

/** Runs `fn` while the unprivileged USER holds the flock of the file at `path` (creating it). */
export async function whileUserHolds(path: string, fn: () => Promise<void>): Promise<void> {
  const user = await startHolder(["--flock", path], { user: true });
  let code;
  try {
    if (user.line !== `flocked ${user.child.pid}`) throw new Error(`no flock: ${user.line}`);
    await fn();
  } finally {
    code = await user.stop();
  }
  if (code !== 0) throw new Error(`the user's holder exited ${code}`);
}

/** Runs a command as the unprivileged USER, as a local user would; throws when it fails. */
export async function asUser(command: string, ...args: string[]): Promise<void> {
  const out = await new Deno.Command("setpriv", { args: [...AS_USER, command, ...args] }).output();
  if (!out.success) {
    throw new Error(`${command} ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
  }
}

async function untilStdinCloses() {
  for await (const _ of Deno.stdin.readable) { /* hold */ }
}

async function asAgent(path: string) {
  const result = await acquireLock(path);
  if (!isLock(result)) {
    console.log(`held ${result.heldBy}`);
  } else if (!result.held) {
    console.log(`no lock: ${result.problem}`);
  } else {
    console.log(`acquired ${Deno.pid}`);
    await untilStdinCloses();
    await result.release();
  }
}

async function asLocalUser(path: string) {
  const file = await Deno.open(path, { read: true, write: true, create: true })
    .catch(() => Deno.open(path, { read: true }));
  console.log(await file.tryLock(true) ? `flocked ${Deno.pid}` : "busy");
  await untilStdinCloses();
  file.close();
}

if (import.meta.main) {
  if (Deno.args[0] === "--flock") await asLocalUser(Deno.args[1]);
  else await asAgent(Deno.args[0]);
}
