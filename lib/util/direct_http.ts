/**
 * Deno HTTP clients that never go through a proxy: for the container runtime's unix socket and
 * for the admin endpoint on loopback.
 *
 * Deno's fetch reads HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY (and their lower-case forms)
 * from the process environment when a client is built, and its NO_PROXY check applies even to a
 * client whose transport is an explicit unix socket: with `NO_PROXY=127.0.0.1,localhost`, as many
 * nodes' /etc/environment sets, a request for `http://localhost/...` is sent to TCP port 80 of
 * localhost instead of the socket, so the runtime looks unreachable on every pass and no
 * checkpoint is ever activated. A TCP client to the admin endpoint would send `[::1]`, which is
 * rarely in NO_PROXY, to the proxy. Neither must ever use a proxy, so the variables are taken
 * out of the environment while the client is built and put back at once; the client keeps what
 * it read then, across reconnects. Both happen in one synchronous stretch, so no other code of
 * this process can see the environment without them.
 */

/**
 * The origin of requests over a unix socket. The socket is what connects, and the host only
 * names the peer; it is an address of the discard-only IPv6 prefix 100::/64 (RFC 6666), which
 * no NO_PROXY lists, rather than `localhost`, which most do. Deno matches a NO_PROXY of `*`
 * against names only, so only an entry covering this address (`::/0`) could still send such a
 * request elsewhere: the variables are hidden as well (createDirectHttpClient).
 */
export const UNIX_SOCKET_ORIGIN = "http://[100::]";

/** Every variable Deno's HTTP client consults for a proxy. */
export const PROXY_VARIABLES = [
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "ALL_PROXY",
  "NO_PROXY",
  "http_proxy",
  "https_proxy",
  "all_proxy",
  "no_proxy",
] as const;

/**
 * Another JS thread of this process (the test runner runs test files in workers of one process)
 * may put its own hidden copy back while this one builds: the client is then built again.
 */
const ATTEMPTS = 10;

function hideProxyVariables(): Map<string, string> {
  const hidden = new Map<string, string>();
  for (const name of PROXY_VARIABLES) {
    const value = Deno.env.get(name);
    if (value === undefined) continue;
    hidden.set(name, value);
    Deno.env.delete(name);
  }
  return hidden;
}

export function createDirectHttpClient(options: Deno.CreateHttpClientOptions): Deno.HttpClient {
  for (let attempt = 1;; attempt++) {
    const hidden = hideProxyVariables();
    try {
      const client = Deno.createHttpClient(options);
      const seen = PROXY_VARIABLES.some((name) => Deno.env.get(name) !== undefined);
      if (!seen || attempt === ATTEMPTS) return client;
      client.close();
    } finally {
      for (const [name, value] of hidden) Deno.env.set(name, value);
    }
  }
}
