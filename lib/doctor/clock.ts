/**
 * The node's clock against the API server's: one answer's `Date` header, which has whole
 * seconds, read between the moment the node asked and the moment it heard.
 */
import type { ServerTime } from "../sources/apiserver.ts";
import type { SourceResult } from "../sources/types.ts";
import { describeFailure, type Finding, ok, warning } from "./finding.ts";

/** How far the clocks may disagree before it matters. */
export const CLOCK_TOLERANCE_MS = 5_000;

/**
 * The API server's clock minus the node's lies between `low` and `high`: the server read its
 * clock between the node's `sentMs` and `receivedMs`, and its Date header cut that reading to the
 * second.
 */
export function clockOffsetBounds(time: ServerTime): { low: number; high: number } {
  return { low: time.dateMs - time.receivedMs, high: time.dateMs + 1_000 - time.sentMs };
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

export function clockFinding(result: SourceResult<ServerTime>): Finding {
  const subject = "clock";
  const fix = "synchronize the node's clock (chrony, systemd-timesyncd or ntpd; `timedatectl` " +
    "shows whether it is): certificates are judged by it, and the API server judges the " +
    "agent's by its own";
  if (!result.ok) {
    return warning(
      "clock",
      subject,
      `not checked: the API server's clock could not be read (${describeFailure(result.failure)})`,
      "check again once the API server answers; meanwhile compare `date -u` with another node",
    );
  }
  const { low, high } = clockOffsetBounds(result.value);
  const server = `the API server (${result.value.gitVersion})`;
  if (low > CLOCK_TOLERANCE_MS) {
    return warning(
      "clock",
      subject,
      `the node's clock is at least ${seconds(low)} behind ${server}'s Date`,
      fix,
    );
  }
  if (high < -CLOCK_TOLERANCE_MS) {
    return warning(
      "clock",
      subject,
      `the node's clock is at least ${seconds(-high)} ahead of ${server}'s Date`,
      fix,
    );
  }
  if (high - low > 2 * CLOCK_TOLERANCE_MS) {
    return warning(
      "clock",
      subject,
      `not checked: ${server} took ${seconds(high - low - 1_000)} to answer, too long to tell ` +
        `the clocks apart within ${seconds(CLOCK_TOLERANCE_MS)}`,
      "run doctor again",
    );
  }
  return ok(
    "clock",
    subject,
    `the node's clock agrees with ${server}'s Date within ${seconds(CLOCK_TOLERANCE_MS)} ` +
      `(the API server's minus the node's: between ${seconds(low)} and ${seconds(high)})`,
  );
}
