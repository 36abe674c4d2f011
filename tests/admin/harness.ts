/**
 * A real daemon on a simulated node with its admin endpoint served on loopback, a clock the test
 * moves, and every log line kept; plus raw HTTP for requests fetch would rewrite (dot segments).
 */
import { join } from "node:path";
import { Agent, type AgentOptions } from "../../lib/pass/agent.ts";
import { concatBytes } from "../../lib/util/bytes.ts";
import { createDirectHttpClient, UNIX_SOCKET_ORIGIN } from "../../lib/util/direct_http.ts";
import type { ListenAddress } from "../../lib/admin/listen.ts";
import {
  type AdminServer,
  type AdminServerOptions,
  startAdminServer,
} from "../../lib/admin/server.ts";
import type { Config } from "../../lib/config/types.ts";
import { type Clock, type Instant, NANOS_PER_MILLI, parseInstant } from "../../lib/core/time.ts";
import { Daemon } from "../../lib/daemon/daemon.ts";
import type { HeapTrimmer } from "../../lib/daemon/memory.ts";
import type { Timers } from "../../lib/util/timers.ts";
import type { ChangeFeed } from "../../lib/sources/changes.ts";
import { LogCapture } from "../helpers/log_capture.ts";
import { connectNode } from "../../lib/sources/node.ts";
import { SimNode, type SimNodeOptions } from "../../lib/sim/node.ts";
import { AgentStores } from "../../lib/store/agent_stores.ts";
import type { Pod } from "../../lib/core/pod.ts";
import { containerOf } from "../helpers/promotion.ts";

export const START = parseInstant("2026-03-01T10:00:00Z")!;

export class ManualClock implements Clock {
  constructor(public t: Instant = START) {}
  now(): Instant {
    return this.t;
  }
  advance(ms: number) {
    this.t += BigInt(ms) * NANOS_PER_MILLI;
  }
}

export { LogCapture, type LogLine } from "../helpers/log_capture.ts";

/** A daemon on a SimNode, without its loop: the test runs passes one by one. */
export class DaemonFixture {
  private constructor(
    readonly node: SimNode,
    readonly config: Config,
    readonly daemon: Daemon,
    readonly stores: AgentStores,
    readonly clock: ManualClock,
    readonly log: LogCapture,
    readonly close: () => Promise<void>,
  ) {}

  /** `overrides`: settings, or settings made from the node (its paths); `loop`: what the
   *  sources tell of their own accord, the loop's timers (which may move the fixture's clock),
   *  what the agent tells of each action as it is done, and what trims the heap between passes. */
  static async start(
    overrides: Partial<Config> | ((node: SimNode) => Partial<Config>) = {},
    nodeOptions: SimNodeOptions = {},
    loop: {
      changes?: ChangeFeed;
      timers?: (clock: ManualClock) => Timers;
      onApplied?: AgentOptions["onApplied"];
      heap?: HeapTrimmer;
    } = {},
  ): Promise<DaemonFixture> {
    const node = await SimNode.start(nodeOptions);
    try {
      const config = node.config(typeof overrides === "function" ? overrides(node) : overrides);
      const clock = new ManualClock();
      const log = new LogCapture();
      const connected = await connectNode(config);
      const sources = loop.changes ? { ...connected, changes: loop.changes } : connected;
      const stores = await AgentStores.open(config.stateDir, log.logger);
      const agent = new Agent({
        config,
        sources,
        clock,
        log: log.logger,
        ...(loop.onApplied ? { onApplied: loop.onApplied } : {}),
      });
      const timers = loop.timers?.(clock);
      const daemon = new Daemon({
        agent,
        stores,
        config,
        clock,
        log: log.logger,
        timers,
        ...(loop.heap ? { heap: loop.heap } : {}),
      });
      return new DaemonFixture(node, config, daemon, stores, clock, log, async () => {
        sources.runtime.close();
        await node.close();
      });
    } catch (e) {
      await node.close();
      throw e;
    }
  }

  /** One pass, then the simulated kubelet catches up with what it wrote. */
  async pass() {
    const report = await this.daemon.runPass();
    await this.node.sync();
    return report;
  }

  async writeToken(content: string, mode = 0o600) {
    await Deno.writeTextFile(this.config.adminTokenFile, content, { mode });
    await Deno.chmod(this.config.adminTokenFile, mode);
  }
}

/** The simulated node's API server pod, a DaemonSet's. */
export const APISERVER = "kube-system/kube-apiserver-7x2kq";

/**
 * A bad rollout of the API server: its DaemonSet replaces the pod with one (a new name, the same
 * controller) of an image that exits as it starts. Returns the new pod, whose spec waits as a
 * candidate while its checkpoint keeps the old one, and which crash-loops.
 */
export function badRollout(f: DaemonFixture): Promise<Pod> {
  const image = "registry.k8s.io/kube-apiserver:v1.99.0-typo";
  f.node.breakImage(image);
  return f.node.replaceParent(APISERVER, (pod) => {
    containerOf(pod).image = image;
    return pod;
  });
}

export interface ServedFixture extends DaemonFixture {
  server: AdminServer;
  listen: Exclude<ListenAddress, { kind: "off" }>;
  /** fetch against the endpoint (TCP or the unix socket). */
  request(path: string, init?: RequestInit): Promise<Response>;
  /** One request written byte for byte; the path reaches the server exactly as given. */
  raw(head: string, body?: Uint8Array): Promise<RawResponse>;
  /** A bare connection to the endpoint, for what no HTTP client would send. */
  connect(): Promise<Deno.Conn>;
}

export interface RawResponse {
  status: number;
  headers: Headers;
  body: string;
}

/**
 * Runs `fn` against a served daemon; `via: "unix"` serves on a socket in the node's temp dir.
 * Before the server starts, `prepare` may set the node up (e.g. write a token file); `serve`:
 * the server's connection limits and timers.
 */
export async function withServedDaemon(
  opts: {
    via?: "tcp" | "unix";
    config?: Partial<Config>;
    prepare?: (f: DaemonFixture) => Promise<void>;
    serve?: Pick<AdminServerOptions, "limits" | "timers">;
  },
  fn: (f: ServedFixture) => Promise<void>,
) {
  const fixture = await DaemonFixture.start(opts.config);
  try {
    await opts.prepare?.(fixture);
    const listen: ServedFixture["listen"] = opts.via === "unix"
      ? { kind: "unix", path: join(fixture.node.root, "run/admin.sock") }
      : { kind: "tcp", hostname: "127.0.0.1", port: 0 };
    const server = await startAdminServer({
      daemon: fixture.daemon,
      listen,
      clock: fixture.clock,
      log: fixture.log.logger,
      ...opts.serve,
    });
    // Never through a proxy the environment may name (lib/util/direct_http.ts).
    const client = createDirectHttpClient(
      listen.kind === "unix" ? { proxy: { transport: "unix", path: listen.path } } : {},
    );
    const origin = listen.kind === "unix" ? UNIX_SOCKET_ORIGIN : `http://${server.address}`;
    const served = Object.assign(fixture, {
      server,
      listen,
      request: (path: string, init: RequestInit = {}) =>
        fetch(`${origin}${path}`, { ...init, client }),
      raw: (head: string, body?: Uint8Array) => rawRequest(listen, server.address, head, body),
      connect: () => connectTo(listen, server.address),
    });
    try {
      await fn(served);
    } finally {
      client.close();
      await server.close();
    }
  } finally {
    await fixture.close();
  }
}

export async function readAll(conn: Deno.Conn): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  const buffer = new Uint8Array(16 * 1024);
  for (;;) {
    const n = await conn.read(buffer).catch(() => null);
    if (n === null) break;
    chunks.push(buffer.slice(0, n));
  }
  return concatBytes(chunks);
}

export async function writeAll(conn: Deno.Conn, bytes: Uint8Array) {
  let offset = 0;
  while (offset < bytes.length) offset += await conn.write(bytes.subarray(offset));
}

function dechunk(body: string): string {
  let out = "";
  let rest = body;
  for (;;) {
    const eol = rest.indexOf("\r\n");
    const size = parseInt(rest.slice(0, eol), 16);
    if (!(size > 0)) return out;
    out += rest.slice(eol + 2, eol + 2 + size);
    rest = rest.slice(eol + 2 + size + 2);
  }
}

function connectTo(listen: ServedFixture["listen"], address: string): Promise<Deno.Conn> {
  return listen.kind === "unix"
    ? Deno.connect({ transport: "unix", path: listen.path })
    : Deno.connect({
      hostname: "127.0.0.1",
      port: Number(address.slice(address.lastIndexOf(":") + 1)),
    });
}

/**
 * `head` is the request line and headers without the final blank line; Host (unless given) and
 * Connection: close are added.
 */
export async function rawRequest(
  listen: ServedFixture["listen"],
  address: string,
  head: string,
  body?: Uint8Array,
): Promise<RawResponse> {
  const conn = await connectTo(listen, address);
  try {
    const host = /\r\nHost:/i.test(head) ? "" : "\r\nHost: localhost";
    const text = `${head}${host}\r\nConnection: close\r\n\r\n`;
    await writeAll(conn, new TextEncoder().encode(text));
    // The server may answer (413) and close before it has read everything.
    if (body) await writeAll(conn, body).catch(() => {});
    const reply = new TextDecoder().decode(await readAll(conn));
    const split = reply.indexOf("\r\n\r\n");
    const [statusLine, ...headerLines] = reply.slice(0, split).split("\r\n");
    const headers = new Headers(headerLines.map((line) => {
      const colon = line.indexOf(":");
      return [line.slice(0, colon).trim(), line.slice(colon + 1).trim()] as [string, string];
    }));
    const rawBody = reply.slice(split + 4);
    return {
      status: Number(statusLine.split(" ")[1]),
      headers,
      body: headers.get("transfer-encoding") === "chunked" ? dechunk(rawBody) : rawBody,
    };
  } finally {
    conn.close();
  }
}

/** GET over raw HTTP, answering status and parsed JSON body. */
export async function rawGetJson(f: ServedFixture, path: string) {
  const answer = await f.raw(`GET ${path} HTTP/1.1`);
  return { status: answer.status, body: JSON.parse(answer.body) as Record<string, unknown> };
}
