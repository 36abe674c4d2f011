/**
 * Run as its own process by tests/disk/mounts_test.ts, with the compiled binary's permissions:
 * prints what readOnlyDirs and separateMounts answer for the directories given (JSON argument
 * `{readOnly: string[], separate: [string, string]}`).
 */
import { readOnlyDirs, separateMounts } from "../../lib/disk/mounts.ts";

const { readOnly, separate } = JSON.parse(Deno.args[0]) as {
  readOnly: string[];
  separate: [string, string];
};
console.log(JSON.stringify({
  readOnly: Object.fromEntries(readOnlyDirs(readOnly)),
  separate: separateMounts(...separate) ?? null,
}));
