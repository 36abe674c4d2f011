/** A fake /proc tree, for the checks that read the kubelet's command line (this machine runs none). */
import { join } from "node:path";

export interface FakeProcess {
  pid: number;
  comm: string;
  args: string[];
}

/** /proc as the kernel shows it: numbered directories with `cmdline` (NUL-separated) and `comm`. */
export async function fakeProc(root: string, processes: FakeProcess[]): Promise<string> {
  const proc = join(root, "proc");
  for (const p of processes) {
    await Deno.mkdir(join(proc, String(p.pid)), { recursive: true });
    await Deno.writeTextFile(join(proc, String(p.pid), "cmdline"), `${p.args.join("\0")}\0`);
    await Deno.writeTextFile(join(proc, String(p.pid), "comm"), `${p.comm}\n`);
  }
  // What else is there: a process that ended while it was read, and entries that are no process.
  await Deno.mkdir(join(proc, "999"), { recursive: true });
  await Deno.mkdir(join(proc, "sys"), { recursive: true });
  await Deno.writeTextFile(join(proc, "uptime"), "1.0 1.0\n");
  return proc;
}
