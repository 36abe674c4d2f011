/**
 * Where the admin endpoint listens (`adminListen`), and whether that address is local. The
 * config loader checks the syntax; this module decides what the address means. Both the daemon
 * (to bind) and `ckpt-agent status` (to connect) read it from here.
 */
import { isIP } from "node:net";
import { ConfigError } from "../config/errors.ts";
import type { Config } from "../config/types.ts";
import { canonicalIPv6, isLoopbackHost } from "../util/ip.ts";

export { isLoopbackHost };

export type ListenAddress =
  | { kind: "off" }
  | { kind: "tcp"; hostname: string; port: number }
  | { kind: "unix"; path: string };

/** Parses an address the config loader accepted; throws on anything else. */
export function parseListenAddress(text: string): ListenAddress {
  if (text === "off") return { kind: "off" };
  if (text.startsWith("unix:")) return { kind: "unix", path: text.slice("unix:".length) };
  const m = /^(?:\[([^\]]*)\]|([^:[\]]*)):(\d{1,5})$/.exec(text);
  if (!m) throw new Error(`not an admin listen address: ${JSON.stringify(text)}`);
  return { kind: "tcp", hostname: m[1] ?? m[2], port: Number(m[3]) };
}

/**
 * Whether an HTTP Host header names this machine by a loopback name. A browser that a web page
 * led to the endpoint by DNS rebinding sends the page's host name instead.
 */
export function isLoopbackHostHeader(host: string): boolean {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+))(?::\d{1,5})?$/.exec(host);
  return m !== null && isLoopbackHost(m[1] ?? m[2]);
}

export function formatListenAddress(address: ListenAddress): string {
  switch (address.kind) {
    case "off":
      return "off";
    case "unix":
      return `unix:${address.path}`;
    case "tcp":
      return isIP(address.hostname) === 6
        ? `[${address.hostname}]:${address.port}`
        : `${address.hostname}:${address.port}`;
  }
}

/**
 * The address the daemon may bind. A non-loopback address is a configuration error unless
 * `adminAllowRemote` says it is meant: the endpoint shows what runs on the node, and is served
 * without TLS.
 */
export function adminListenAddress(config: Config): ListenAddress {
  const address = parseListenAddress(config.adminListen);
  if (address.kind === "tcp" && !config.adminAllowRemote && !isLoopbackHost(address.hostname)) {
    throw new ConfigError(
      `adminListen (--admin-listen): ${
        JSON.stringify(config.adminListen)
      } is not a loopback address; binding it needs adminAllowRemote (--admin-allow-remote)`,
    );
  }
  return address;
}

/** Where a client on this machine reaches an endpoint bound to `address` (not "off"). */
export function connectAddress(
  address: Exclude<ListenAddress, { kind: "off" }>,
): Exclude<ListenAddress, { kind: "off" }> {
  if (address.kind === "unix") return address;
  // A wildcard bind answers on loopback too.
  if (address.hostname === "0.0.0.0") {
    return { ...address, hostname: "127.0.0.1" };
  }
  if (isIP(address.hostname) === 6 && canonicalIPv6(address.hostname) === "::") {
    return { ...address, hostname: "::1" };
  }
  return address;
}
