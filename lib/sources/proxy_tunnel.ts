/**
 * A TCP stream to a target through a proxy: an HTTP CONNECT tunnel (over TLS to an https://
 * proxy), or a SOCKS5 CONNECT (RFC 1928, with RFC 1929 username/password when the proxy URL
 * carries them). The target's host name is sent to the proxy as it is, never resolved here: the
 * proxy resolves it, as with Go's proxies (socks5 and socks5h alike).
 *
 * node:net and node:tls are used directly: they never consult a proxy variable, whereas Deno's
 * node:http picks up Node's NODE_USE_ENV_PROXY on its own.
 */
import { Buffer } from "node:buffer";
import net from "node:net";
import tls from "node:tls";
import { ipBytes } from "../util/ip.ts";
import { bareHost, describeProxy, portOf, type Proxy } from "./proxy.ts";

/** How the TLS connection to an https:// proxy is verified: like the target's. */
export interface ProxyTls {
  caPem?: string;
  verifyServer: boolean;
}

/** The most of a CONNECT answer's header read before giving up on the proxy. */
const MAX_CONNECT_HEADER_BYTES = 16 * 1024;

/** RFC 1928 §6 reply codes. */
const SOCKS_REPLIES: Record<number, string> = {
  1: "general SOCKS server failure",
  2: "connection not allowed by ruleset",
  3: "network unreachable",
  4: "host unreachable",
  5: "connection refused",
  6: "TTL expired",
  7: "command not supported",
  8: "address type not supported",
};

export class ProxyError extends Error {}

/**
 * Reads a socket's bytes on demand while a handshake is under way; `release` hands the socket
 * over paused, with any bytes read past the handshake put back.
 */
class HandshakeReader {
  readonly #socket: net.Socket;
  #buffered = Buffer.alloc(0);
  #ended: Error | undefined;
  #wake: (() => void) | undefined;
  readonly #onData = (chunk: Buffer) => {
    this.#buffered = Buffer.concat([this.#buffered, chunk]);
    this.#wake?.();
  };
  readonly #onEnd = () => {
    this.#ended ??= new ProxyError("the proxy closed the connection");
    this.#wake?.();
  };
  readonly #onError = (e: Error) => {
    this.#ended ??= e;
    this.#wake?.();
  };

  constructor(socket: net.Socket) {
    this.#socket = socket;
    socket.on("data", this.#onData);
    socket.on("end", this.#onEnd);
    socket.on("close", this.#onEnd);
    socket.on("error", this.#onError);
  }

  async #until(enough: () => boolean): Promise<void> {
    while (!enough()) {
      if (this.#ended) throw this.#ended;
      await new Promise<void>((resolve) => this.#wake = resolve);
      this.#wake = undefined;
    }
  }

  async read(count: number): Promise<Buffer> {
    await this.#until(() => this.#buffered.length >= count);
    const bytes = this.#buffered.subarray(0, count);
    this.#buffered = this.#buffered.subarray(count);
    return bytes;
  }

  /** Up to and including the blank line that ends an HTTP header. */
  async readHeader(): Promise<string> {
    const end = () => this.#buffered.indexOf("\r\n\r\n");
    await this.#until(() => end() >= 0 || this.#buffered.length > MAX_CONNECT_HEADER_BYTES);
    if (end() < 0) throw new ProxyError(`answer header larger than ${MAX_CONNECT_HEADER_BYTES}`);
    return (await this.read(end() + 4)).toString("latin1");
  }

  release(): net.Socket {
    this.#socket.pause();
    this.#socket.off("data", this.#onData);
    this.#socket.off("end", this.#onEnd);
    this.#socket.off("close", this.#onEnd);
    this.#socket.off("error", this.#onError);
    if (this.#buffered.length > 0) this.#socket.unshift(this.#buffered);
    return this.#socket;
  }
}

/** `host:port` as a CONNECT request names it (an IPv6 address bracketed). */
function authority(host: string, port: number): string {
  return net.isIPv6(host) ? `[${host}]:${port}` : `${host}:${port}`;
}

function credentials(proxy: Proxy): { user: string; password: string } | undefined {
  const { username, password } = proxy.url;
  if (username === "" && password === "") return undefined;
  return { user: decodeURIComponent(username), password: decodeURIComponent(password) };
}

function connectToProxy(proxy: Proxy, proxyTls: ProxyTls): net.Socket {
  const host = bareHost(proxy.url.hostname);
  const port = portOf(proxy.url);
  if (proxy.url.protocol !== "https:") return net.connect({ host, port });
  return tls.connect({
    host,
    port,
    ...(net.isIP(host) ? {} : { servername: host }),
    rejectUnauthorized: proxyTls.verifyServer,
    ...(proxyTls.caPem !== undefined ? { ca: proxyTls.caPem } : {}),
  });
}

async function httpConnect(reader: HandshakeReader, socket: net.Socket, proxy: Proxy, to: string) {
  const auth = credentials(proxy);
  const lines = [
    `CONNECT ${to} HTTP/1.1`,
    `Host: ${to}`,
    "User-Agent: ckpt-agent",
    ...(auth ? [`Proxy-Authorization: Basic ${btoa(`${auth.user}:${auth.password}`)}`] : []),
  ];
  socket.write(`${lines.join("\r\n")}\r\n\r\n`);
  const header = await reader.readHeader();
  const status = /^HTTP\/1\.[01] (\d{3})(?: ([^\r\n]*))?\r\n/.exec(header);
  if (!status) {
    throw new ProxyError(
      `CONNECT answered with something else than HTTP: ${JSON.stringify(header.slice(0, 100))}`,
    );
  }
  // Go accepts exactly 200, as most clients do.
  if (status[1] !== "200") {
    throw new ProxyError(`CONNECT ${to} refused: ${status[1]} ${status[2] ?? ""}`.trimEnd());
  }
}

function socksAddress(host: string): Buffer {
  const ip = ipBytes(host);
  if (ip) return Buffer.from([ip.length === 4 ? 1 : 4, ...ip]);
  const name = Buffer.from(host, "utf8");
  if (name.length > 255) throw new ProxyError(`host name too long for SOCKS5: ${host}`);
  return Buffer.concat([Buffer.from([3, name.length]), name]);
}

async function socksConnect(
  reader: HandshakeReader,
  socket: net.Socket,
  proxy: Proxy,
  host: string,
  port: number,
) {
  const auth = credentials(proxy);
  socket.write(Buffer.from(auth ? [5, 2, 0, 2] : [5, 1, 0]));
  const [version, method] = await reader.read(2);
  if (version !== 5) throw new ProxyError("not a SOCKS5 proxy");
  if (method === 0xff) {
    throw new ProxyError(
      auth ? "no acceptable authentication method" : "the proxy requires authentication",
    );
  }
  if (method === 2 && auth) {
    const user = Buffer.from(auth.user, "utf8"), password = Buffer.from(auth.password, "utf8");
    socket.write(
      Buffer.concat([
        Buffer.from([1, user.length]),
        user,
        Buffer.from([password.length]),
        password,
      ]),
    );
    const [, status] = await reader.read(2);
    if (status !== 0) throw new ProxyError("username/password refused");
  } else if (method !== 0) {
    throw new ProxyError(`the proxy chose authentication method ${method}, which was not offered`);
  }
  const portBytes = Buffer.alloc(2);
  portBytes.writeUInt16BE(port);
  socket.write(Buffer.concat([Buffer.from([5, 1, 0]), socksAddress(host), portBytes]));
  const [replyVersion, reply, , addressType] = await reader.read(4);
  if (replyVersion !== 5) throw new ProxyError("not a SOCKS5 reply");
  if (reply !== 0) {
    throw new ProxyError(
      `CONNECT ${authority(host, port)} refused: ${SOCKS_REPLIES[reply] ?? `reply ${reply}`}`,
    );
  }
  const addressLength = addressType === 1
    ? 4
    : addressType === 4
    ? 16
    : addressType === 3
    ? (await reader.read(1))[0]
    : undefined;
  if (addressLength === undefined) throw new ProxyError(`bad address type ${addressType}`);
  await reader.read(addressLength + 2);
}

/**
 * A socket that reaches `host:port` through `proxy`, paused, with nothing of the target's read
 * yet; rejects with an error naming the proxy. `signal` aborts the attempt (the socket is then
 * destroyed).
 */
export async function openTunnel(
  proxy: Proxy,
  proxyTls: ProxyTls,
  host: string,
  port: number,
  signal: AbortSignal,
): Promise<net.Socket> {
  if (signal.aborted) throw new ProxyError(`via proxy ${describeProxy(proxy)}: no time left`);
  const socket = connectToProxy(proxy, proxyTls);
  const reader = new HandshakeReader(socket);
  const abort = () => socket.destroy(new ProxyError("no answer in time"));
  signal.addEventListener("abort", abort, { once: true });
  try {
    await new Promise<void>((resolve, reject) => {
      socket.once(proxy.url.protocol === "https:" ? "secureConnect" : "connect", resolve);
      socket.once("error", reject);
    });
    if (proxy.url.protocol === "socks5:" || proxy.url.protocol === "socks5h:") {
      await socksConnect(reader, socket, proxy, host, port);
    } else {
      await httpConnect(reader, socket, proxy, authority(host, port));
    }
    return reader.release();
  } catch (e) {
    socket.destroy();
    throw new ProxyError(`via proxy ${describeProxy(proxy)}: ${(e as Error).message}`);
  } finally {
    signal.removeEventListener("abort", abort);
  }
}
