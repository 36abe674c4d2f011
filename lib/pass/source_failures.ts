/**
 * What the log says about failing sources: each problem once when it is new, at debug while it
 * lasts, and at info when its source answers again, so a node in an outage does not log the same
 * lines every pass.
 */
import type { Logger } from "../util/log.ts";
import { isConfigurationFailure, type SourceFailure, type SourceName } from "../sources/types.ts";

export class SourceFailureLog {
  /** Passes so far, and the failures logged (source/kind/problem) with the pass last seen in. */
  #passes = 0;
  readonly #problemsSeen = new Map<string, number>();
  /** Sources whose observation failed in the previous pass. */
  #failingSources = new Set<SourceName>();

  constructor(private readonly log: Logger) {}

  /** A pass's observation failures, once per pass; also says which sources answer again. */
  newPass(failures: SourceFailure[], apiAvailable: boolean) {
    this.#passes++;
    for (const [problem, pass] of this.#problemsSeen) {
      if (pass < this.#passes - 1) this.#problemsSeen.delete(problem);
    }
    const failing = new Set(failures.map((failure) => failure.source));
    for (const source of this.#failingSources) {
      if (!failing.has(source)) this.log.info("source answers again", { source });
    }
    this.#failingSources = failing;
    for (const failure of failures) this.failed(failure, apiAvailable);
  }

  /**
   * A failure is said at warn (error when the configuration must change) when it is new: not
   * seen, with the same source, kind and problem, in this pass or the previous one. While it
   * repeats it is said at debug.
   */
  failed(failure: SourceFailure, apiAvailable: boolean) {
    const { log } = this;
    const problem = `${failure.source}/${failure.kind}/${failure.problem ?? failure.message}`;
    const seen = this.#problemsSeen.has(problem);
    this.#problemsSeen.set(problem, this.#passes);
    const fields = { source: failure.source, kind: failure.kind, error: failure.message };
    if (seen) return log.debug("source still failing", fields);
    // The kubelet authorizes through the API server: refusals during an outage are the outage.
    const outage = failure.source === "kubelet" && !apiAvailable &&
      failure.kind !== "misconfigured";
    if (failure.kind === "not-permitted") {
      // Ours: the problem names the permission and the flag; every checkpoint holds meanwhile.
      log.error("permission missing: every checkpoint holds its state until it is given", {
        ...fields,
        permission: failure.problem,
      });
    } else if (!isConfigurationFailure(failure) || outage) {
      log.warn("source unavailable this pass", fields);
    } else if (failure.kind === "misconfigured") {
      // The message says what to fix: a kubeconfig field, a proxy variable, kubeletCaFile.
      log.error("source not asked: fix the configuration the error names", fields);
    } else {
      log.error("credentials refused: check the kubeconfig and RBAC", fields);
    }
  }
}
