/**
 * The process metrics Prometheus's client libraries export, read when scraped:
 * process_cpu_seconds_total, process_resident_memory_bytes, process_start_time_seconds,
 * process_virtual_memory_bytes, process_open_fds and process_max_fds.
 *
 * CPU time, resident memory and the start time come from the runtime, under any permissions.
 * The rest only /proc tells, and Deno lets a process read /proc only when it holds every
 * permission (`--allow-read` is not enough; `--allow-all` is): under the compiled agent's flags
 * (scripts/permissions.ts) those samples are left out, rather than read (which fails, or prompts
 * at a terminal) or shown as 0.
 */
import process from "node:process";

/** Deno's permission kinds: with every one granted, Deno lets /proc be read. */
const PERMISSIONS = ["read", "write", "net", "env", "sys", "run", "ffi", "import"] as const;

/** Whether Deno lets this process read /proc: asked of the permissions, so it never prompts. */
export function procReadable(): boolean {
  return PERMISSIONS.every((name) => Deno.permissions.querySync({ name }).state === "granted");
}

/** User and system CPU time of the whole process, in seconds. */
export function cpuSeconds(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}

export function residentMemoryBytes(): number {
  return Deno.memoryUsage().rss;
}

/** When the runtime started, since the Unix epoch, in seconds. */
export function startTimeSeconds(): number {
  return Math.round(performance.timeOrigin) / 1000;
}

/** What /proc says of this process; undefined for what cannot be read (or is not Linux). */
export class ProcSelf {
  constructor(
    private readonly readable = procReadable(),
    private readonly dir = "/proc/self",
  ) {}

  #read<T>(read: () => T | undefined): T | undefined {
    if (!this.readable) return undefined;
    try {
      return read();
    } catch {
      return undefined;
    }
  }

  /** Open descriptors: the entries of fd/ (the one reading it included, as other clients count). */
  openFds(): number | undefined {
    return this.#read(() => [...Deno.readDirSync(`${this.dir}/fd`)].length);
  }

  /** The soft limit on open descriptors (RLIMIT_NOFILE), from limits. */
  maxFds(): number | undefined {
    return this.#read(() => {
      const line = Deno.readTextFileSync(`${this.dir}/limits`).split("\n")
        .find((l) => l.startsWith("Max open files"));
      const soft = line?.slice("Max open files".length).trim().split(/\s+/)[0];
      if (soft === "unlimited") return Infinity;
      return soft !== undefined && /^\d+$/.test(soft) ? Number(soft) : undefined;
    });
  }

  /** Virtual memory size in bytes: stat's vsize, its 23rd field. */
  virtualMemoryBytes(): number | undefined {
    return this.#read(() => {
      const stat = Deno.readTextFileSync(`${this.dir}/stat`);
      // The command name (field 2) is in parentheses and may hold spaces and parentheses.
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const vsize = fields[23 - 3];
      return vsize !== undefined && /^\d+$/.test(vsize) ? Number(vsize) : undefined;
    });
  }
}
