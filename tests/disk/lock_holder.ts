/**
 * A second process for the lock tests, as another agent or as a local user racing the agent:
 * `lock_holder.ts PATH`: an agent: takes the lock at PATH and prints `acquired <pid>` (then holds
 * it until killed or stdin closes), `held <pid>`, or `no lock: <problem>`.
 * `startHolder` runs it. `whileUserHolds` has an unprivileged local user (uid and gid 65534, no
 * groups: setpriv) hold a lock file's flock while a test runs, as any user can: open it as it is
 * (following links, creating it where the user may, read-only where the user may only read) and
 * flock it, with Debian's python3 (tests/helpers/local_user.ts), not with this file.
 */
import { acquireLock, isLock } from "../../lib/disk/lock.ts";
import { asUser as asUserCommand, PYTHON } from "../helpers/local_user.ts";

export const USER = 65534;
const HOLDER = new URL(import.meta.url).pathname;

export interface Holder {
  child: Deno.ChildProcess;
  /** The first line the holder printed. */
  line: string;
  /** Lets the holder go and waits for it; its exit code. */
  stop(): Promise<number>;
}

/** What the local user runs: prints `flocked <pid>` or `busy`, then holds until stdin closes. */
const USER_FLOCK = `
import fcntl, os, sys
try:
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
except OSError:
    fd = os.open(sys.argv[1], os.O_RDONLY)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print(f"flocked {os.getpid()}", flush=True)
except BlockingIOError:
    print("busy", flush=True)
sys.stdin.read()
`;

export function startHolder(args: string[]): Promise<Holder> {
  return spawnHolder(Deno.execPath(), ["run", "--allow-all", "--quiet", HOLDER, ...args]);
}

async function spawnHolder(command: string, args: string[]): Promise<Holder> {
  const child = new Deno.Command(command, {
    args,
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
  const [setpriv, ...args] = asUserCommand(USER);
  const user = await spawnHolder(setpriv, [...args, PYTHON, "-c", USER_FLOCK, path]);
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
  const [setpriv, ...as] = asUserCommand(USER);
  const out = await new Deno.Command(setpriv, { args: [...as, command, ...args] }).output();
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

if (import.meta.main) await asAgent(Deno.args[0]);
