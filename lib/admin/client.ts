/**
 * A client of a running agent's admin endpoint, over TCP or its unix socket, for commands such
 * as `ckpt-agent status`.
 */
import { createDirectHttpClient, UNIX_SOCKET_ORIGIN } from "../util/direct_http.ts";
import { osErrorCode, osErrorText } from "../util/os_error.ts";
import { connectAddress, formatListenAddress, type ListenAddress } from "./listen.ts";

/** The endpoint answers from memory: a slower answer means the agent is stuck. */
export const ADMIN_CLIENT_TIMEOUT_MS = 5_000;

export interface AdminReply {
  status: number;
  body: unknown;
}

/** GETs `path` and parses the JSON answer; throws when no answer (or no JSON) comes back. */
export function adminGetJson(
  listen: Exclude<ListenAddress, { kind: "off" }>,
  path: string,
  timeoutMs = ADMIN_CLIENT_TIMEOUT_MS,
): Promise<AdminReply> {
  return adminRequestJson(listen, path, {}, timeoutMs);
}

/**
 * POSTs to `path` with the bearer token (none when undefined) and parses the JSON answer; throws
 * when no answer (or no JSON) comes back. A verb waits for the pass under way: the timeout is the
 * caller's.
 */
export function adminPostJson(
  listen: Exclude<ListenAddress, { kind: "off" }>,
  path: string,
  token: string | undefined,
  timeoutMs: number,
): Promise<AdminReply> {
  return adminRequestJson(listen, path, {
    method: "POST",
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
  }, timeoutMs);
}

const ENOENT = 2, EACCES = 13, ECONNREFUSED = 111;

/**
 * Why no agent answered at the address, in one line, and what to do about it when nothing else
 * says: `no agent answered at unix:/run/ckpt-agent/admin.sock: no such socket` and `is the daemon
 * running? systemctl status ckpt-agent`.
 */
export function noAnswer(address: string, error: unknown): { why: string; todo: string } {
  const code = osErrorCode(error);
  const [what, todo] = code === ENOENT
    ? ["no such socket", "is the daemon running? systemctl status ckpt-agent"]
    : code === ECONNREFUSED
    ? ["connection refused", "is the daemon running, listening there? systemctl status ckpt-agent"]
    : code === EACCES
    ? ["permission denied", "the agent's socket is root's: run this as root"]
    : error instanceof Error && error.name === "TimeoutError"
    ? [error.message, "the agent may be stuck: journalctl -u ckpt-agent"]
    : [osErrorText(error), "systemctl status ckpt-agent"];
  return { why: `no agent answered at ${address}: ${what}`, todo };
}

async function adminRequestJson(
  listen: Exclude<ListenAddress, { kind: "off" }>,
  path: string,
  init: { method?: string; headers?: Record<string, string> },
  timeoutMs: number,
): Promise<AdminReply> {
  const target = connectAddress(listen);
  // Never through a proxy, whatever the environment says (lib/util/direct_http.ts).
  const client = createDirectHttpClient(
    target.kind === "unix" ? { proxy: { transport: "unix", path: target.path } } : {},
  );
  // Over a unix socket the host is not used; the path and headers are what the server sees.
  const origin = target.kind === "unix"
    ? UNIX_SOCKET_ORIGIN
    : `http://${formatListenAddress(target)}`;
  const abort = new AbortController();
  const timer = setTimeout(
    () => abort.abort(new DOMException(`no answer in ${timeoutMs} ms`, "TimeoutError")),
    timeoutMs,
  );
  try {
    const response = await fetch(`${origin}${path}`, {
      signal: abort.signal,
      method: init.method ?? "GET",
      headers: { accept: "application/json", ...init.headers },
      client,
    });
    return { status: response.status, body: await response.json() };
  } finally {
    clearTimeout(timer);
    client.close();
  }
}
