/**
 * The proxy decision, by table: Go's ProxyFromEnvironment (golang.org/x/net/http/httpproxy) as
 * kubectl applies it, a kubeconfig's proxy-url, and loopback never proxied.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import {
  chooseProxy,
  parseProxyUrl,
  portOf,
  type ProxyChoice,
  type ProxyEnvironment,
} from "../../lib/sources/proxy.ts";

/** "direct", "<variable> <proxy URL>", or "misconfigured: <message>". */
function decide(target: string, env: ProxyEnvironment, proxyUrl?: string): string {
  const choice: ProxyChoice = chooseProxy(
    new URL(target),
    env,
    proxyUrl === undefined ? undefined : parseProxyUrl(proxyUrl, false) as URL,
  );
  switch (choice.kind) {
    case "direct":
      return "direct";
    case "proxy": {
      const url = choice.proxy.url;
      const login = url.username || url.password ? `${url.username}:${url.password}@` : "";
      return `${choice.proxy.from} ${url.protocol}//${login}${url.hostname}:${portOf(url)}`;
    }
    case "misconfigured":
      return `misconfigured: ${choice.message}`;
  }
}

const HTTPS = { HTTPS_PROXY: "http://proxy:3128" };

Deno.test("which variable: HTTPS_PROXY for https, HTTP_PROXY for http, upper case first", () => {
  const cases: [string, ProxyEnvironment, string][] = [
    ["https://api.example:6443", {}, "direct"],
    ["https://api.example:6443", HTTPS, "HTTPS_PROXY http://proxy:3128"],
    ["https://api.example:6443", { https_proxy: "http://low:1" }, "https_proxy http://low:1"],
    [
      "https://api.example:6443",
      { HTTPS_PROXY: "http://up:1", https_proxy: "http://low:1" },
      "HTTPS_PROXY http://up:1",
    ],
    // An empty value counts as unset.
    [
      "https://api.example:6443",
      { HTTPS_PROXY: "", https_proxy: "http://low:1" },
      "https_proxy http://low:1",
    ],
    ["https://api.example:6443", { HTTP_PROXY: "http://p:1" }, "direct"],
    ["http://api.example:8080", { HTTP_PROXY: "http://p:1" }, "HTTP_PROXY http://p:1"],
    ["http://api.example:8080", { http_proxy: "http://p:1" }, "http_proxy http://p:1"],
    ["http://api.example:8080", HTTPS, "direct"],
    // ALL_PROXY is not Go's.
    ["https://api.example:6443", { ALL_PROXY: "socks5://p:1080" }, "direct"],
    ["http://api.example:8080", { all_proxy: "http://p:1" }, "direct"],
    // A CGI environment: HTTP_PROXY may come from a client's Proxy header.
    ["http://api.example:8080", { HTTP_PROXY: "http://p:1", REQUEST_METHOD: "GET" }, "direct"],
    [
      "https://api.example:6443",
      { ...HTTPS, REQUEST_METHOD: "GET" },
      "HTTPS_PROXY http://proxy:3128",
    ],
  ];
  for (const [target, env, expected] of cases) {
    assertEquals([target, env, decide(target, env)], [target, env, expected]);
  }
});

Deno.test("proxy values: no scheme means http://, default ports, every supported scheme", () => {
  const cases: [string, string][] = [
    ["proxy.corp:3128", "HTTPS_PROXY http://proxy.corp:3128"],
    ["10.0.0.1:3128", "HTTPS_PROXY http://10.0.0.1:3128"],
    ["proxy.corp", "HTTPS_PROXY http://proxy.corp:80"],
    ["http://proxy.corp", "HTTPS_PROXY http://proxy.corp:80"],
    ["https://proxy.corp", "HTTPS_PROXY https://proxy.corp:443"],
    ["socks5://proxy.corp", "HTTPS_PROXY socks5://proxy.corp:1080"],
    ["socks5h://proxy.corp:9050", "HTTPS_PROXY socks5h://proxy.corp:9050"],
    ["http://user:p%40ss@proxy.corp:3128", "HTTPS_PROXY http://user:p%40ss@proxy.corp:3128"],
    ["http://[fd00::1]:3128", "HTTPS_PROXY http://[fd00::1]:3128"],
    [
      "ftp://proxy.corp",
      'misconfigured: HTTPS_PROXY: "ftp://proxy.corp": proxy scheme ftp: is not supported ' +
      "(http, https, socks5, socks5h)",
    ],
    ["http://", 'misconfigured: HTTPS_PROXY: "http://" is not a URL'],
    ["http://a b:1", 'misconfigured: HTTPS_PROXY: "http://a b:1" is not a URL'],
  ];
  for (const [value, expected] of cases) {
    assertEquals(
      [value, decide("https://api.example", { HTTPS_PROXY: value })],
      [value, expected],
    );
  }
  // A value that cannot be used is only an error where it would be used.
  assertEquals(decide("https://api.example", { HTTPS_PROXY: "ftp://p", NO_PROXY: "*" }), "direct");
});

Deno.test("NO_PROXY: *, IP addresses, CIDR ranges, domains and subdomains, ports", () => {
  const proxied = "HTTPS_PROXY http://proxy:3128";
  const cases: [string, string, string][] = [
    ["*", "https://api.example:6443", "direct"],
    [" * ", "https://10.0.0.1:6443", "direct"],
    ["", "https://api.example:6443", proxied],
    // Domains match themselves and subdomains; a leading dot or *. only subdomains.
    ["example", "https://api.example:6443", "direct"],
    ["example", "https://example:6443", "direct"],
    ["api.example", "https://api.example", "direct"],
    ["ample", "https://api.example", proxied],
    [".example", "https://api.example", "direct"],
    [".example", "https://example", proxied],
    ["*.example", "https://api.example", "direct"],
    ["*.example", "https://example", proxied],
    ["API.Example", "https://api.example", "direct"],
    // Entries are comma-separated and trimmed; Go does not split on spaces.
    ["other, api.example ,x", "https://api.example", "direct"],
    ["other api.example", "https://api.example", proxied],
    // Ports: an entry's port must be the target's (https defaults to 443).
    ["api.example:6443", "https://api.example:6443", "direct"],
    ["api.example:6443", "https://api.example:443", proxied],
    ["api.example:443", "https://api.example", "direct"],
    ["api.example:", "https://api.example:6443", "direct"],
    // IP addresses, with and without ports; IPv6 bracketed or not.
    ["10.0.0.1", "https://10.0.0.1:6443", "direct"],
    ["10.0.0.1:6443", "https://10.0.0.1:6443", "direct"],
    ["10.0.0.1:443", "https://10.0.0.1:6443", proxied],
    ["10.0.0.2", "https://10.0.0.1:6443", proxied],
    ["fd00::1", "https://[fd00::1]:6443", "direct"],
    ["[fd00::1]:6443", "https://[fd00:0::1]:6443", "direct"],
    ["::ffff:10.0.0.1", "https://10.0.0.1", "direct"],
    // CIDR ranges.
    ["10.0.0.0/8", "https://10.200.3.4:6443", "direct"],
    ["10.0.0.0/8", "https://11.0.0.1:6443", proxied],
    ["192.168.4.0/22", "https://192.168.7.255", "direct"],
    ["192.168.4.0/22", "https://192.168.8.0", proxied],
    ["fd00::/8", "https://[fd12::5]", "direct"],
    ["fd00::/8", "https://10.0.0.1", proxied],
    ["0.0.0.0/0", "https://[fd12::5]", proxied],
    // A domain entry never matches an address, nor an address entry a name.
    ["10.0.0.1", "https://api.example", proxied],
    ["example", "https://10.0.0.1", proxied],
    // no_proxy when NO_PROXY is unset.
  ];
  for (const [noProxy, target, expected] of cases) {
    assertEquals(
      [noProxy, target, decide(target, { ...HTTPS, NO_PROXY: noProxy })],
      [noProxy, target, expected],
    );
  }
  assertEquals(decide("https://api.example", { ...HTTPS, no_proxy: "example" }), "direct");
  assertEquals(
    decide("https://api.example", { ...HTTPS, NO_PROXY: "other", no_proxy: "example" }),
    proxied,
  );
});

Deno.test("loopback is never proxied, whatever the variables or proxy-url say", () => {
  const everything = {
    HTTPS_PROXY: "http://proxy:3128",
    HTTP_PROXY: "http://proxy:3128",
    NO_PROXY: "",
  };
  for (
    const target of [
      "https://127.0.0.1:10250",
      "https://127.9.8.7:6443",
      "https://[::1]:6443",
      "https://[::ffff:127.0.0.1]:6443",
      "https://localhost:6443",
      "https://LOCALHOST:6443",
      "http://127.0.0.1:10255",
      "http://localhost",
    ]
  ) {
    assertEquals([target, decide(target, everything)], [target, "direct"]);
    assertEquals([target, decide(target, {}, "http://proxy:3128")], [target, "direct"]);
  }
  assertEquals(decide("https://128.0.0.1", everything), "HTTPS_PROXY http://proxy:3128");
  assertEquals(decide("https://localhost.example", everything), "HTTPS_PROXY http://proxy:3128");
});

Deno.test("a kubeconfig's proxy-url is used instead of the environment", () => {
  const env = { HTTPS_PROXY: "http://env:1", NO_PROXY: "api.example" };
  assertEquals(
    decide("https://api.example", env, "socks5://socks:1080"),
    "proxy-url socks5://socks:1080",
  );
  assertEquals(decide("http://api.example", {}, "https://p"), "proxy-url https://p:443");
  // A proxy-url names its scheme.
  assertEquals(
    parseProxyUrl("proxy.corp:3128", false),
    '"proxy.corp:3128": proxy scheme proxy.corp: is not supported (http, https, socks5, socks5h)',
  );
  assertEquals(parseProxyUrl("10.0.0.1:3128", false), '"10.0.0.1:3128" is not a URL');
});
