/**
 * How the writes of a pass run: each checkpoint's work is tried on its own, and a failure becomes
 * an error of the pass report, never a throw, so one checkpoint that cannot be written stops no
 * other.
 */
import { mapConcurrent } from "../util/map_concurrent.ts";
import type { Logger } from "../util/log.ts";
import { permissionOfError } from "../util/permission.ts";
import type { AppliedAction, PassError, PassReport, WriteOp } from "./report.ts";

/** What working on one checkpoint adds to the pass report. */
export type Outcome = Pick<PassReport, "applied" | "errors">;

/**
 * Checkpoints worked on at once. Each one's files are its own, but every Deno file call waits
 * for a thread-pool round trip: one after the other, a steady pass over 1,000 parents spent most
 * of its time waiting (docs/benchmarks.md, "Node pass"). It also bounds the connections a
 * refresh opens to the API server at once.
 */
const CHECKPOINTS_IN_FLIGHT = 8;

export class Writes {
  constructor(
    private readonly log: Logger,
    /** Told of each action as soon as it is done (AgentOptions.onApplied). */
    private readonly onApplied?: (action: AppliedAction) => void,
  ) {}

  applied(report: Outcome, action: AppliedAction) {
    report.applied.push(action);
    this.onApplied?.(action);
  }

  async attempt(report: Outcome, op: WriteOp, id: string, work: () => Promise<void>) {
    try {
      await work();
    } catch (e) {
      const error: PassError = { op, id, message: (e as Error).message };
      report.errors.push(error);
      // A permission the agent runs without: the flag that grants it, for whoever reads this.
      const missing = permissionOfError(e);
      this.log.error("write failed", { ...error, ...missing });
    }
  }

  /**
   * Runs `work` for every id, CHECKPOINTS_IN_FLIGHT at a time; what each adds to the report is
   * added in the order of `ids`, so a report does not depend on which write finished first.
   * Once `cut` is aborted no further id is started (those under way finish); returns how many
   * were left.
   */
  async forEachCheckpoint(
    report: Outcome,
    ids: readonly string[],
    work: (id: string, outcome: Outcome) => Promise<void>,
    cut?: AbortSignal,
  ): Promise<number> {
    let left = 0;
    const outcomes = await mapConcurrent(ids, CHECKPOINTS_IN_FLIGHT, async (id) => {
      const outcome: Outcome = { applied: [], errors: [] };
      if (cut?.aborted) left++;
      else await work(id, outcome);
      return outcome;
    });
    for (const outcome of outcomes) {
      report.applied.push(...outcome.applied);
      report.errors.push(...outcome.errors);
    }
    return left;
  }
}
