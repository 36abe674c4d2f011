/**
 * Serves the admin app on TCP or on a unix socket, for as long as the daemon runs, with bounded
 * connections and client timeouts (connections.ts). A unix socket's path is prepared carefully:
 * a stale socket (one nobody answers on) is removed, anything else found there is left alone and
 * the endpoint is not started; the socket is removed again on shutdown if it is still ours.
 */
import { dirname, join } from "node:path";
import type { Clock } from "../core/time.ts";
import type { Daemon } from "../daemon/daemon.ts";
import type { Logger } from "../util/log.ts";
import { realTimers, type Timers } from "../util/timers.ts";
import { createAdminApp } from "./app.ts";
import { CONNECTION_LIMITS, type ConnectionLimits, serveConnections } from "./connections.ts";
import { formatListenAddress, isLoopbackHost, type ListenAddress } from "./listen.ts";
import { AdminMetrics } from "./metrics.ts";
import { AdminToken } from "./token.ts";
import { versionInfo } from "../version_info.ts";

export interface AdminServer {
  /** Where it listens, as `host:port` (the real port when 0 was asked) or `unix:/path`. */
  readonly address: string;
  /** Stops accepting, waits for requests under way, and removes its unix socket. */
  close(): Promise<void>;
}

export interface AdminServerOptions {
  daemon: Daemon;
  listen: Exclude<ListenAddress, { kind: "off" }>;
  clock: Clock;
  log: Logger;
  /** Default: CONNECTION_LIMITS. */
  limits?: ConnectionLimits;
  /** The connections' timers; a test may drive them. */
  timers?: Timers;
}

export class AdminListenError extends Error {
  override name = "AdminListenError";
}

/** Whether something accepts connections on the socket at `path`. */
async function answers(path: string): Promise<boolean> {
  try {
    const conn = await Deno.connect({ transport: "unix", path });
    conn.close();
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.ConnectionRefused || e instanceof Deno.errors.NotFound) {
      return false;
    }
    throw new AdminListenError(`unix:${path}: cannot tell whether it is in use: ${e}`);
  }
}

/** Makes `path` free for a new socket, or says why it is not ours to take. */
async function clearStaleSocket(path: string, log: Logger) {
  let info: Deno.FileInfo;
  try {
    info = await Deno.lstat(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return;
    throw new AdminListenError(`unix:${path}: ${(e as Error).message}`);
  }
  if (!info.isSocket) {
    throw new AdminListenError(`unix:${path}: exists and is not a socket; it is left alone`);
  }
  if (await answers(path)) {
    throw new AdminListenError(`unix:${path}: another process is listening on it`);
  }
  await Deno.remove(path);
  log.info("admin: removed a stale socket", { path });
}

/**
 * Deno's unix listener unlinks whatever is at its socket path when it is closed, even a file that
 * took the socket's place. So the socket is bound under a private temporary name and hard-linked
 * into place — a link never replaces an existing file — and the temporary name is removed at
 * once: at shutdown Deno unlinks a name that no longer exists, and `close` removes the real path
 * only if it is still this socket.
 */
async function listenUnix(path: string): Promise<Deno.Listener> {
  // Short names: a socket path has a length limit (108 bytes on Linux).
  const dir = await Deno.makeTempDir({ dir: dirname(path), prefix: ".ckpt-" });
  try {
    const listener = Deno.listen({ transport: "unix", path: join(dir, "s") });
    try {
      await Deno.link(join(dir, "s"), path);
    } catch (e) {
      listener.close();
      throw e;
    }
    return listener;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** The socket's inode, to recognise it at shutdown. */
async function inodeOf(path: string): Promise<number | null> {
  try {
    const info = await Deno.lstat(path);
    return info.isSocket ? info.ino : null;
  } catch {
    return null;
  }
}

function listenError(address: string, e: unknown): AdminListenError {
  return e instanceof AdminListenError
    ? e
    : new AdminListenError(`${address}: cannot listen: ${(e as Error).message}`);
}

/**
 * Starts the endpoint; an AdminListenError when the address cannot be used. The daemon's
 * passes feed the server's metrics from now on.
 */
export async function startAdminServer(opts: AdminServerOptions): Promise<AdminServer> {
  const { daemon, listen, clock, log } = opts;
  const wanted = formatListenAddress(listen);
  const metrics = new AdminMetrics(daemon, await versionInfo());
  const token = await AdminToken.load(daemon.config.adminTokenFile, log);
  const app = createAdminApp({
    daemon,
    metrics,
    token,
    clock,
    log,
    startedAt: clock.now(),
    loopbackHostOnly: listen.kind === "tcp" && isLoopbackHost(listen.hostname),
  });
  let listener: Deno.Listener;
  let socketInode: number | null = null;
  try {
    if (listen.kind === "unix") {
      await clearStaleSocket(listen.path, log);
      listener = await listenUnix(listen.path);
      socketInode = await inodeOf(listen.path);
    } else {
      listener = Deno.listen({ hostname: listen.hostname, port: listen.port });
    }
  } catch (e) {
    throw listenError(wanted, e);
  }
  const served = serveConnections({
    listener,
    fetch: async (request) => {
      try {
        return await app.fetch(request);
      } catch (e) {
        log.error("admin: request failed", { error: e as Error });
        return Response.json({ error: "internal error" }, { status: 500 });
      }
    },
    limits: opts.limits ?? CONNECTION_LIMITS,
    timers: opts.timers ?? realTimers,
    log,
  });
  const addr = listener.addr as Deno.NetAddr;
  const address = listen.kind === "unix"
    ? wanted
    : formatListenAddress({ kind: "tcp", hostname: addr.hostname, port: addr.port });
  log.info("admin: listening", { address });
  return {
    address,
    async close() {
      await served.close();
      if (listen.kind === "unix" && socketInode !== null) {
        // Only the socket this server made: never a file someone put there since.
        if (await inodeOf(listen.path) === socketInode) await Deno.remove(listen.path);
      }
      log.info("admin: stopped", { address });
    },
  };
}

/**
 * The endpoint as the daemon runs it: nothing when `off`, and when the address cannot be used,
 * an error in the log and no endpoint. Checkpoints must still be activated during an outage;
 * an admin port taken by another process must not stop that (monitoring notices the silence).
 */
export async function serveAdmin(
  opts: Omit<AdminServerOptions, "listen"> & { listen: ListenAddress },
): Promise<AdminServer | undefined> {
  const { listen } = opts;
  if (listen.kind === "off") {
    opts.log.info("admin: endpoint off");
    return undefined;
  }
  try {
    return await startAdminServer({ ...opts, listen });
  } catch (e) {
    if (!(e instanceof AdminListenError)) throw e;
    opts.log.error("admin: endpoint not started; the agent runs without it", { error: e.message });
    return undefined;
  }
}
