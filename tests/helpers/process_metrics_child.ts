/**
 * Prints what the process metrics read in this process (lib/admin/process_metrics.ts), so that a
 * test can run it with the permissions of its choice.
 */
import {
  cpuSeconds,
  procReadable,
  ProcSelf,
  residentMemoryBytes,
  startTimeSeconds,
} from "../../lib/admin/process_metrics.ts";

const proc = new ProcSelf();
console.log(JSON.stringify({
  procReadable: procReadable(),
  cpu: cpuSeconds() > 0,
  rss: residentMemoryBytes() > 0,
  start: startTimeSeconds() > 1e9,
  openFds: proc.openFds() ?? null,
  maxFds: proc.maxFds() ?? null,
  virtual: proc.virtualMemoryBytes() ?? null,
}));
