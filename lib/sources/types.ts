/**
 * What the observation sources return. A source never throws past its module: it returns a
 * value or a typed failure, and the agent decides what the failure means
 * (docs/design.md#source-failures).
 */
import { missingPermission } from "../util/permission.ts";

export type SourceName = "apiserver" | "kubelet" | "runtime";

export type FailureKind =
  /** No connection could be made (refused, DNS, TLS handshake, socket missing). */
  | "unreachable"
  /** The call did not finish within its timeout. */
  | "timeout"
  /** The server answered 5xx: it is up but cannot serve (e.g. etcd is gone). */
  | "server-error"
  /** 401: our credentials were refused. A configuration error. */
  | "unauthorized"
  /** 403: our identity may not do this. A configuration error. */
  | "forbidden"
  /** 404: the object does not exist. */
  | "not-found"
  /** Any other status, or a body that is not what the API promises. */
  | "bad-response"
  /** The client could not be built (e.g. the kubeconfig is unreadable). A configuration error. */
  | "misconfigured"
  /**
   * A permission the agent runs without (Deno's NotCapable): a failure of its own, never the
   * peer's. The pass holds every checkpoint as it is (docs/design.md#own-failures).
   */
  | "not-permitted";

export interface SourceFailure {
  source: SourceName;
  kind: FailureKind;
  /** One line, for logs: what was asked and what went wrong. */
  message: string;
  status?: number;
  /**
   * What kind of problem this is, in a few words that stay the same from one pass to the next
   * while the problem does (`not JSON (text/html)`, `body cut short`), where the message quotes
   * what varies. Unset: the message says it.
   */
  problem?: string;
}

export type SourceResult<T> = { ok: true; value: T } | { ok: false; failure: SourceFailure };

export function succeeded<T>(value: T): SourceResult<T> {
  return { ok: true, value };
}

/**
 * Every failure of a source is made here, so a permission the agent lacks is told apart in one
 * place, whatever caught it (a connection, a file, a socket): it fails as not-permitted, with the
 * permission as its problem. A peer's answer (with a status) is never read this way.
 */
export function failed<T>(
  source: SourceName,
  kind: FailureKind,
  message: string,
  status?: number,
  problem?: string,
): SourceResult<T> {
  const missing = status === undefined ? missingPermission(message) : undefined;
  if (missing !== undefined) {
    kind = "not-permitted";
    problem = `${missing.permission}: run with ${missing.flag}`;
  }
  return {
    ok: false,
    failure: {
      source,
      kind,
      message,
      ...(status ? { status } : {}),
      ...(problem !== undefined ? { problem } : {}),
    },
  };
}

/**
 * 401, 403, an unusable kubeconfig and a missing permission mean the agent is misconfigured, not
 * the cluster down.
 */
export function isConfigurationFailure(failure: SourceFailure): boolean {
  return failure.kind === "unauthorized" || failure.kind === "forbidden" ||
    failure.kind === "misconfigured" || failure.kind === "not-permitted";
}
