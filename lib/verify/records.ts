/** `verify`'s checks of the two stores: every record verifies, has its own name, is private. */
import { join } from "node:path";
import { RECORD_FILE_MODE, STORE_DIR_MODE } from "../store/layout.ts";
import { mapConcurrent } from "../util/map_concurrent.ts";
import { readRecordDir, type RecordType } from "../store/record_files.ts";
import { type Check, modeFinding, modeOf } from "./check.ts";

const STATS_IN_FLIGHT = 32;

/** Every record of one store verifies, sits under its own name, and is private. */
export function recordCheck<T>(name: string, type: RecordType<T>, stateDir: string): Check {
  return {
    name,
    async run() {
      const dir = join(stateDir, type.dir);
      const mode = await modeOf(dir);
      // A store that was never opened is empty, not broken.
      if (mode === undefined) return { checked: 0, findings: [] };
      const entries = await readRecordDir(type, dir);
      const perEntry = await mapConcurrent(
        entries,
        STATS_IN_FLIGHT,
        async (entry) =>
          entry.error
            ? [{ file: entry.path, problem: entry.error.problem }]
            : modeFinding(entry.path, await modeOf(entry.path) ?? null, RECORD_FILE_MODE),
      );
      return {
        checked: entries.length,
        findings: [...modeFinding(dir, mode, STORE_DIR_MODE), ...perEntry.flat()],
      };
    },
  };
}
