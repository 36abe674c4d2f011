/**
 * How the log says a lasting problem: once when it starts, at warn or error, naming what failed;
 * once when it ends, at info, with how long it lasted; at debug on every look in between. A node
 * in an outage thus says each of its problems twice, however many passes the outage lasts.
 *
 * A problem is known by its key (a source, a checkpoint's volume, the pass); what failed may
 * change while it lasts (another error from the same source), and each new way it fails is said
 * once at the problem's level, never the same one twice before the problem ends.
 */
import { formatDuration } from "../config/duration.ts";
import { type Clock, type Instant, NANOS_PER_MILLI } from "../core/time.ts";
import type { Fields, Logger } from "../util/log.ts";

export interface Problem {
  level: "warn" | "error";
  msg: string;
  /** What the problem is about: the end's line names it too. */
  about: Fields;
  /** What failed, for the lines while it lasts. */
  fields?: Fields;
  /** How it fails, in words that stay the same while it does; unset: the message. */
  what?: string;
}

interface Open {
  since: Instant;
  about: Fields;
  said: Set<string>;
}

export class ProblemLog {
  readonly #open = new Map<string, Open>();

  /** `overMsg`: the line that says a problem ended. */
  constructor(
    private readonly log: Logger,
    private readonly clock: Clock,
    private readonly overMsg: string,
  ) {}

  /** The problem under `key` is there now. */
  there(key: string, problem: Problem) {
    const what = problem.what ?? problem.msg;
    const fields = { ...problem.about, ...problem.fields };
    const open = this.#open.get(key);
    if (open?.said.has(what)) {
      return this.log.debug(problem.msg, { ...fields, for: this.#lasted(open) });
    }
    if (open) open.said.add(what);
    else {this.#open.set(key, {
        since: this.clock.now(),
        about: problem.about,
        said: new Set([what]),
      });}
    this.log[problem.level](problem.msg, fields);
  }

  /** The problem under `key`, if there is one, is over; `fields` add to the line that says so. */
  over(key: string, fields: Fields = {}) {
    const open = this.#open.get(key);
    if (!open) return;
    this.#open.delete(key);
    this.log.info(this.overMsg, { ...open.about, lasted: this.#lasted(open), ...fields });
  }

  /** Every problem `within` selects that is not among `there` is over. */
  settle(there: ReadonlySet<string>, within: (key: string) => boolean = () => true) {
    for (const key of [...this.#open.keys()]) {
      if (within(key) && !there.has(key)) this.over(key);
    }
  }

  has(key: string): boolean {
    return this.#open.has(key);
  }

  /** Forgets, without a word, the problems of what is no longer there to have them. */
  retain(keep: (key: string) => boolean) {
    for (const key of [...this.#open.keys()]) if (!keep(key)) this.#open.delete(key);
  }

  #lasted(open: Open): string {
    return formatDuration(Number((this.clock.now() - open.since) / NANOS_PER_MILLI));
  }
}
