/**
 * Proxy environments a node may give the agent (/etc/environment, a systemd drop-in, a shell),
 * for tests that run the agent as a subprocess with one of them. The proxies named are dead:
 * nothing listens on the discard port, so anything sent to them fails.
 */

export const DEAD_PROXY = "http://127.0.0.1:9";
const DEAD_SOCKS = "socks5://127.0.0.1:9";

export const PROXY_ENVIRONMENTS: Record<string, Record<string, string>> = {
  "NO_PROXY=127.0.0.1,localhost": { NO_PROXY: "127.0.0.1,localhost" },
  "no_proxy=*": { no_proxy: "*" },
  "dead HTTP_PROXY, HTTPS_PROXY, ALL_PROXY": {
    HTTP_PROXY: DEAD_PROXY,
    HTTPS_PROXY: DEAD_PROXY,
    ALL_PROXY: DEAD_SOCKS,
  },
  "dead http_proxy, https_proxy, all_proxy": {
    http_proxy: DEAD_PROXY,
    https_proxy: DEAD_PROXY,
    all_proxy: DEAD_SOCKS,
  },
  "NODE_USE_ENV_PROXY=1 with dead proxies and an empty NO_PROXY": {
    NODE_USE_ENV_PROXY: "1",
    HTTP_PROXY: DEAD_PROXY,
    HTTPS_PROXY: DEAD_PROXY,
    NO_PROXY: "",
  },
  "all of them, NO_PROXY for loopback": {
    NO_PROXY: "127.0.0.1,localhost",
    no_proxy: "127.0.0.1,localhost",
    HTTP_PROXY: DEAD_PROXY,
    HTTPS_PROXY: DEAD_PROXY,
    ALL_PROXY: DEAD_SOCKS,
    http_proxy: DEAD_PROXY,
    https_proxy: DEAD_PROXY,
    all_proxy: DEAD_SOCKS,
    NODE_USE_ENV_PROXY: "1",
  },
};
