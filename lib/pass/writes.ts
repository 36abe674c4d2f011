/**
 * How the writes of a pass run: each checkpoint's work is tried on its own, and a failure becomes
 * an error of the pass report, never a throw, so one checkpoint that cannot be written stops no
 * other.
 */
import type { Clock } from "../core/time.ts";
import { mapConcurrent } from "../util/map_concurrent.ts";
import type { Fields, Logger } from "../util/log.ts";
import { permissionOfError } from "../util/permission.ts";
import { ProblemLog } from "./problem_log.ts";
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

/** The key of the state dir's records among the failing writes. */
const RECORDS = "records";

export class Writes {
  /** A write that fails is said once, not at every pass that tries it again (a full disk). */
  readonly #failing: ProblemLog;
  #failedThisPass = new Set<string>();

  constructor(
    log: Logger,
    clock: Clock,
    /** Told of each action as soon as it is done (AgentOptions.onApplied). */
    private readonly onApplied?: (action: AppliedAction) => void,
  ) {
    this.#failing = new ProblemLog(log, clock, "write succeeds again");
  }

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
      const key = `${op}/${id}`;
      this.#failedThisPass.add(key);
      this.#failing.there(key, {
        level: "error",
        msg: "write failed",
        about: { op, id },
        // A permission the agent runs without: the flag that grants it, for whoever reads this.
        fields: { message: error.message, ...permissionOfError(e) },
        // The same way of failing, whatever temp file's name the message carries.
        what: (e as { code?: string }).code ?? (e as Error).name,
      });
    }
  }

  /**
   * The state dir refused records in this pass: said once while it refuses them, since a state
   * dir that refuses one write usually refuses them all. `error`: the first refusal's.
   */
  unrecorded(error: string, fields: Fields) {
    this.#failedThisPass.add(RECORDS);
    this.#failing.there(RECORDS, {
      level: "error",
      msg: "state not recorded; it is written again on the next pass",
      about: { op: RECORDS },
      fields: { error, ...fields },
      // The refusal, without the file it named.
      what: error.split(": ")[0],
    });
  }

  /**
   * A pass has ended: a write that failed before and not in it succeeded, or is no longer
   * needed. A pass cut short left writes untried, and settles nothing.
   */
  passEnded(cut: boolean) {
    if (!cut) this.#failing.settle(this.#failedThisPass);
    this.#failedThisPass = new Set();
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
