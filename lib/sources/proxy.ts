/**
 * Which proxy, if any, a request to the API server or the kubelet goes through. Pure: the
 * environment comes in as an argument.
 *
 * The rules are those of kubectl and client-go, which take Go's `http.ProxyFromEnvironment`
 * (golang.org/x/net/http/httpproxy) unless the kubeconfig's cluster names a `proxy-url`:
 * - HTTPS_PROXY for https targets, HTTP_PROXY for http targets; the upper-case name first, then
 *   the lower-case one; an empty value counts as unset;
 * - a value without a scheme (`proxy.corp:3128`) means `http://`;
 * - HTTP_PROXY is ignored when REQUEST_METHOD is set (a CGI environment, where a client's
 *   `Proxy:` header would arrive as HTTP_PROXY); Go refuses the request, the agent goes direct;
 * - NO_PROXY (or no_proxy): comma-separated entries, each trimmed: `*` (nothing is proxied), an
 *   IP address, a CIDR range, or a domain name that matches itself and its subdomains (`.name`
 *   and `*.name` match subdomains only); an address or name may end in `:port`. Entries split on
 *   commas only, as in Go: `a b` is one entry, which matches nothing;
 * - ALL_PROXY is not read (Go does not).
 * Unlike Go, and whatever the variables or `proxy-url` say, a loopback target (127.0.0.0/8, ::1,
 * localhost) is never proxied: the kubelet and a local API server are on this machine, and must
 * be reachable while the network, or the proxy, is not. Unlike Go too, a proxy value that
 * cannot be used is an error naming the variable, not a silent direct connection.
 */
import { inPrefix, ipBytes, isLoopbackHost } from "../util/ip.ts";

export type ProxyEnvironment = Readonly<Record<string, string | undefined>>;

export const PROXY_SCHEMES = ["http:", "https:", "socks5:", "socks5h:"] as const;

export interface Proxy {
  /** http:, https:, socks5: or socks5h:, with a host (the port: portOf); user and password,
   *  if any, are in the URL. */
  url: URL;
  /** Where it came from: the variable's name, or `proxy-url`. */
  from: string;
}

export type ProxyChoice =
  | { kind: "direct" }
  | { kind: "proxy"; proxy: Proxy }
  | { kind: "misconfigured"; message: string };

const DIRECT: ProxyChoice = { kind: "direct" };

const DEFAULT_PORTS: Record<string, string> = {
  "http:": "80",
  "https:": "443",
  "socks5:": "1080",
  "socks5h:": "1080",
};

/** The proxy for display: scheme, host and port, never the credentials. */
export function describeProxy(proxy: Proxy): string {
  return `${proxy.url.protocol}//${proxy.url.host} (${proxy.from})`;
}

/** A host name without the brackets a URL keeps around an IPv6 address. */
export function bareHost(hostname: string): string {
  return hostname.replace(/^\[(.*)\]$/, "$1");
}

/**
 * A proxy URL, or why it cannot be one. `assumeHttp`: a value without a scheme means http://
 * (the environment's rule; a kubeconfig's proxy-url must name its scheme).
 */
export function parseProxyUrl(value: string, assumeHttp: boolean): URL | string {
  // Go also prefixes a value whose scheme parsed without a host ("http://"), which then names
  // a host "http:"; such a value is refused here instead.
  const text = assumeHttp && !value.includes("://") ? `http://${value}` : value;
  const url = URL.canParse(text) ? new URL(text) : undefined;
  if (url === undefined) return `${JSON.stringify(value)} is not a URL`;
  if (!(PROXY_SCHEMES as readonly string[]).includes(url.protocol)) {
    return `${JSON.stringify(value)}: proxy scheme ${url.protocol} is not supported (${
      PROXY_SCHEMES.map((s) => s.slice(0, -1)).join(", ")
    })`;
  }
  if (url.hostname === "") return `${JSON.stringify(value)} names no host`;
  return url;
}

/** The port to connect to: the URL's, else its scheme's default. */
export function portOf(url: URL): number {
  return Number(url.port || DEFAULT_PORTS[url.protocol]);
}

function firstSet(env: ProxyEnvironment, names: string[]): [string, string] | undefined {
  for (const name of names) {
    const value = env[name];
    if (value !== undefined && value !== "") return [name, value];
  }
  return undefined;
}

/** Go's net.SplitHostPort, enough for NO_PROXY entries: undefined when there is no port. */
function splitHostPort(entry: string): [string, string] | undefined {
  if (entry.startsWith("[")) {
    const m = /^\[([^\]]*)\]:(.*)$/.exec(entry);
    return m ? [m[1], m[2]] : undefined;
  }
  const colon = entry.lastIndexOf(":");
  if (colon < 0 || entry.indexOf(":") !== colon) return undefined;
  return [entry.slice(0, colon), entry.slice(colon + 1)];
}

type Matcher = (host: string, port: string, ip: Uint8Array | undefined) => boolean;

/** NO_PROXY as Go reads it (httpproxy's config.init): matchers that say "go direct". */
function noProxyMatchers(noProxy: string): Matcher[] {
  const matchers: Matcher[] = [];
  for (const raw of noProxy.split(",")) {
    const entry = raw.trim().toLowerCase();
    if (entry === "") continue;
    if (entry === "*") return [() => true];
    const cidr = /^(.*)\/(\d{1,3})$/.exec(entry);
    const network = cidr ? ipBytes(cidr[1]) : undefined;
    if (cidr && network && Number(cidr[2]) <= network.length * 8) {
      const bits = Number(cidr[2]);
      matchers.push((_h, _p, ip) => ip !== undefined && inPrefix(ip, network, bits));
      continue;
    }
    const split = splitHostPort(entry);
    if (split && split[0] === "") continue;
    const [host, port] = split ?? [entry, ""];
    const address = ipBytes(host);
    if (address) {
      matchers.push((_h, p, ip) =>
        ip !== undefined && ip.length === address.length && ip.every((b, i) => b === address[i]) &&
        (port === "" || port === p)
      );
      continue;
    }
    const domain = host.startsWith("*.") ? host.slice(1) : host;
    const matchItself = !domain.startsWith(".");
    const suffix = matchItself ? `.${domain}` : domain;
    matchers.push((h, p, ip) =>
      ip === undefined && (h.endsWith(suffix) || (matchItself && h === suffix.slice(1))) &&
      (port === "" || port === p)
    );
  }
  return matchers;
}

/**
 * The way to `target` (an http: or https: URL). `proxyUrl`: the kubeconfig cluster's proxy-url,
 * already checked by parseProxyUrl; when given, the environment is not read.
 */
export function chooseProxy(target: URL, env: ProxyEnvironment, proxyUrl?: URL): ProxyChoice {
  const host = bareHost(target.hostname).toLowerCase();
  if (isLoopbackHost(host)) return DIRECT;
  if (proxyUrl !== undefined) return { kind: "proxy", proxy: { url: proxyUrl, from: "proxy-url" } };
  const https = target.protocol === "https:";
  const set = firstSet(env, https ? ["HTTPS_PROXY", "https_proxy"] : ["HTTP_PROXY", "http_proxy"]);
  if (set === undefined) return DIRECT;
  if (!https && firstSet(env, ["REQUEST_METHOD"])) return DIRECT;
  const port = String(portOf(target));
  const ip = ipBytes(host);
  const noProxy = firstSet(env, ["NO_PROXY", "no_proxy"])?.[1] ?? "";
  if (noProxyMatchers(noProxy).some((match) => match(host, port, ip))) return DIRECT;
  const [name, value] = set;
  const url = parseProxyUrl(value, true);
  if (typeof url === "string") return { kind: "misconfigured", message: `${name}: ${url}` };
  return { kind: "proxy", proxy: { url, from: name } };
}
