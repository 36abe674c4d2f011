/**
 * What the log says of the daemon's passes: one line at debug for each, with what asked for it
 * and what it did; and degraded passes (a source failed, a write failed) as one problem
 * (lib/pass/problem_log.ts): said at warn when passes start to be degraded, naming the failing
 * sources and their errors, and at info when a pass is complete again, with how long it lasted
 * and how many passes. An outage of an hour is two lines at warn and info, not one a pass.
 */
import type { Clock } from "../core/time.ts";
import { ProblemLog } from "../pass/problem_log.ts";
import type { PassReport } from "../pass/report.ts";
import type { Fields, Logger } from "../util/log.ts";
import type { PassCause } from "./pass_scheduler.ts";

/** What made a pass degraded: each failing source with its error, the first failed write. */
function whatFailed(report: PassReport): Fields {
  const fields: Record<string, string | number> = {};
  for (const f of report.failures) {
    const said = `${f.kind}: ${f.message}`;
    fields[f.source] = fields[f.source] === undefined ? said : `${fields[f.source]}; ${said}`;
  }
  const [first] = report.errors;
  if (first) {
    fields.errors = report.errors.length;
    fields.firstError = `${first.op}${first.id ? ` ${first.id}` : ""}: ${first.message}`;
  }
  return fields;
}

export class PassLog {
  readonly #degraded: ProblemLog;
  #degradedPasses = 0;

  constructor(private readonly log: Logger, clock: Clock) {
    this.#degraded = new ProblemLog(log, clock, "passes complete again");
  }

  passed(report: PassReport, cause: PassCause) {
    this.log.debug("pass", {
      trigger: cause.trigger,
      reasons: cause.reasons,
      complete: report.complete,
      durationMs: Math.round(report.durationMs * 10) / 10,
      starts: report.plan.starts.length,
      stops: report.plan.stops.length,
      removes: report.plan.removes.length,
      applied: report.applied.length,
      errors: report.errors.length,
      bytesWritten: report.bytesWritten,
    });
    if (report.complete) {
      this.#degraded.over("pass", { degradedPasses: this.#degradedPasses });
      this.#degradedPasses = 0;
      return;
    }
    // A pass cut short (the API server lost or back while it ran) and nothing else is followed
    // at once by the pass that finishes its work, which says whether passes are degraded.
    if (report.failures.length === 0 && report.errors.length === 0) return;
    this.#degradedPasses++;
    // Said once however the failing sources change while it lasts: each source says its own.
    this.#degraded.there("pass", {
      level: "warn",
      msg: "pass degraded",
      about: {},
      fields: whatFailed(report),
      what: "degraded",
    });
  }
}
