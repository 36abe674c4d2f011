/**
 * What the log says about failing sources (problem_log.ts): a source's problem said once when it
 * starts, each new way it fails once while it lasts, at debug on every pass in between, and at
 * info when the source answers again, so a node in an outage does not log the same lines every
 * pass.
 */
import type { Logger } from "../util/log.ts";
import type { Clock } from "../core/time.ts";
import { isConfigurationFailure, type SourceFailure, type SourceName } from "../sources/types.ts";
import { ProblemLog } from "./problem_log.ts";

export class SourceFailureLog {
  readonly #problems: ProblemLog;
  /** Sources that failed a request (not an observation) since the last pass began. */
  #failedRequests = new Set<SourceName>();

  constructor(log: Logger, clock: Clock) {
    this.#problems = new ProblemLog(log, clock, "source answers again");
  }

  /**
   * A pass's observation failures, once per pass. A source answers again when neither they
   * nor the requests of the pass before (a secret's fetch, retried every pass while it fails)
   * have failed.
   */
  newPass(failures: SourceFailure[], apiAvailable: boolean) {
    const failing = new Set<string>(this.#failedRequests);
    for (const failure of failures) failing.add(failure.source);
    this.#problems.settle(failing);
    this.#failedRequests = new Set();
    for (const failure of failures) this.#say(failure, apiAvailable);
  }

  /** A request of the pass failed. */
  failed(failure: SourceFailure, apiAvailable: boolean) {
    this.#failedRequests.add(failure.source);
    this.#say(failure, apiAvailable);
  }

  /** At warn, or error when the configuration must change. */
  #say(failure: SourceFailure, apiAvailable: boolean) {
    const about = { source: failure.source };
    const fields = { kind: failure.kind, error: failure.message };
    const what = `${failure.kind}/${failure.problem ?? failure.message}`;
    // The kubelet authorizes through the API server: refusals during an outage are the outage.
    const outage = failure.source === "kubelet" && !apiAvailable &&
      failure.kind !== "misconfigured";
    const problem = failure.kind === "not-permitted"
      // Ours: the problem names the permission and the flag; every checkpoint holds meanwhile.
      ? {
        level: "error" as const,
        msg: "permission missing: every checkpoint holds its state until it is given",
        fields: { ...fields, permission: failure.problem },
      }
      : !isConfigurationFailure(failure) || outage
      ? { level: "warn" as const, msg: "source unavailable" }
      : failure.kind === "misconfigured"
      // The message says what to fix: a kubeconfig field, a proxy variable, kubeletCaFile.
      ? { level: "error" as const, msg: "source not asked: fix the configuration the error names" }
      : { level: "error" as const, msg: "credentials refused: check the kubeconfig and RBAC" };
    this.#problems.there(failure.source, { fields, ...problem, about, what });
  }
}
