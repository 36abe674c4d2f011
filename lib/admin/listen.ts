/**
 * Where the admin endpoint listens (`adminListen`), and whether an address is local. The config
 * loader checks the address, and refuses a remote one unless `adminAllowRemote` says it is meant;
 * this module says where to bind and where to connect. Both the daemon (to bind) and
 * `ckpt-agent status` (to connect) read it from here.
 */
import { isIP } from "node:net";
import { type ListenAddress, parseListenAddress } from "../config/kinds.ts";
import { canonicalIPv6, isLoopbackHost } from "../util/ip.ts";

export { isLoopbackHost, type ListenAddress, parseListenAddress };

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
