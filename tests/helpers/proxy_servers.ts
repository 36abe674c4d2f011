/**
 * Real proxies on loopback for the tests: an HTTP proxy (CONNECT tunnels and absolute-form
 * requests, optionally over TLS, optionally requiring Basic credentials, and able to refuse or
 * hang), and a SOCKS5 proxy (RFC 1928, optionally with RFC 1929 username/password).
 *
 * Each resolves host names only from the map it is given: a name such as apiserver.ckpt.test,
 * which no resolver answers, reaches its server only through the proxy, so a test that gets an
 * answer knows the request went through it.
 */
import { Buffer } from "node:buffer";
import net from "node:net";
import tls from "node:tls";
import type { CertAndKey } from "../../lib/sim/pki.ts";

export interface ProxiedRequest {
  /** CONNECT, GET (absolute form), or SOCKS. */
  method: string;
  /** `host:port` for CONNECT and SOCKS, the absolute URL for a forwarded request. */
  target: string;
  /** The Proxy-Authorization header, or `user:password` of a SOCKS login. */
  credentials?: string;
}

/** pass: tunnel or forward; hang: accept the request and never answer; a number: refuse so. */
export type ProxyBehaviour = "pass" | "hang" | number;

export interface TestProxy {
  /** `http://127.0.0.1:<port>`, `https://…` or `socks5://…`, without credentials. */
  readonly url: string;
  readonly requests: readonly ProxiedRequest[];
  behave(behaviour: ProxyBehaviour): void;
  close(): Promise<void>;
}

export interface ProxyOptions {
  /** Names the proxy resolves, to addresses; IP addresses need no entry. */
  hosts?: Record<string, string>;
  /** Credentials the proxy requires. */
  login?: { user: string; password: string };
}

const REASONS: Record<number, string> = {
  403: "Forbidden",
  407: "Proxy Authentication Required",
  502: "Bad Gateway",
  503: "Service Unavailable",
};

function resolveIn(hosts: Record<string, string> | undefined, host: string): string | undefined {
  const bare = host.replace(/^\[(.*)\]$/, "$1");
  return net.isIP(bare) ? bare : hosts?.[bare.toLowerCase()];
}

function splitAuthority(authority: string): { host: string; port: number } {
  const colon = authority.lastIndexOf(":");
  return { host: authority.slice(0, colon), port: Number(authority.slice(colon + 1)) };
}

/** Keeps every socket so that close() ends them all. */
class Sockets {
  readonly #open = new Set<net.Socket>();
  add(socket: net.Socket) {
    this.#open.add(socket);
    socket.on("close", () => this.#open.delete(socket));
    socket.on("error", () => {});
  }
  destroyAll() {
    for (const socket of this.#open) socket.destroy();
  }
}

async function listen(server: net.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as net.AddressInfo).port;
}

function closer(server: net.Server, sockets: Sockets): () => Promise<void> {
  return async () => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    sockets.destroyAll();
    await closed;
  };
}

/** Splices two sockets together, `first` bytes sent upstream before anything else. */
function splice(client: net.Socket, upstream: net.Socket, first: Buffer) {
  if (first.length > 0) upstream.write(first);
  client.pipe(upstream);
  upstream.pipe(client);
  client.on("close", () => upstream.destroy());
  upstream.on("close", () => client.destroy());
}

/** An HTTP proxy; `tls` makes it an https:// proxy with that serving certificate. */
export async function startHttpProxy(
  options: ProxyOptions & { tls?: CertAndKey } = {},
): Promise<TestProxy> {
  const requests: ProxiedRequest[] = [];
  const sockets = new Sockets();
  let behaviour: ProxyBehaviour = "pass";
  const expected = options.login &&
    `Basic ${btoa(`${options.login.user}:${options.login.password}`)}`;

  const onConnection = (client: net.Socket) => {
    sockets.add(client);
    let buffered = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf("\r\n\r\n");
      if (end < 0) return;
      client.off("data", onData);
      const head = buffered.subarray(0, end).toString("latin1").split("\r\n");
      const rest = buffered.subarray(end + 4);
      const [method, target] = head[0].split(" ");
      const headers = new Map(
        head.slice(1).map((line) => {
          const colon = line.indexOf(":");
          return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()];
        }),
      );
      const credentials = headers.get("proxy-authorization");
      requests.push({ method, target, ...(credentials ? { credentials } : {}) });
      const answer = (status: number, extra = "") =>
        client.end(
          `HTTP/1.1 ${status} ${REASONS[status] ?? "Refused"}\r\n${extra}Content-Length: 0\r\n\r\n`,
        );
      if (behaviour === "hang") return;
      if (typeof behaviour === "number") return answer(behaviour);
      if (expected && credentials !== expected) {
        return answer(407, 'Proxy-Authenticate: Basic realm="test"\r\n');
      }
      const authority = method === "CONNECT" ? target : new URL(target).host;
      const { host, port } = splitAuthority(authority);
      const address = resolveIn(options.hosts, host);
      if (address === undefined) return answer(502);
      const upstream = net.connect(port, address);
      sockets.add(upstream);
      upstream.on("error", () => answer(502));
      upstream.once("connect", () => {
        if (method === "CONNECT") {
          client.write("HTTP/1.1 200 Connection established\r\n\r\n");
          return splice(client, upstream, rest);
        }
        // Forwarded: the request line in origin form, without the proxy's own header.
        const url = new URL(target);
        const forwarded = [
          `${method} ${url.pathname}${url.search} HTTP/1.1`,
          ...head.slice(1).filter((line) => !/^proxy-authorization:/i.test(line)),
        ];
        splice(
          client,
          upstream,
          Buffer.concat([Buffer.from(`${forwarded.join("\r\n")}\r\n\r\n`), rest]),
        );
      });
    };
    client.on("data", onData);
  };

  const server = options.tls
    ? tls.createServer({ cert: options.tls.certPem, key: options.tls.keyPem }, onConnection)
    : net.createServer(onConnection);
  server.on("connection", (socket: net.Socket) => sockets.add(socket));
  const port = await listen(server);
  return {
    url: `${options.tls ? "https" : "http"}://127.0.0.1:${port}`,
    requests,
    behave: (next) => void (behaviour = next),
    close: closer(server, sockets),
  };
}

/** Reads exactly what each step of a SOCKS handshake needs. */
class Reader {
  #buffered = Buffer.alloc(0);
  #wake: (() => void) | undefined;
  constructor(socket: net.Socket) {
    socket.on("data", (chunk: Buffer) => {
      this.#buffered = Buffer.concat([this.#buffered, chunk]);
      this.#wake?.();
    });
  }
  async read(count: number): Promise<Buffer> {
    while (this.#buffered.length < count) await new Promise<void>((r) => this.#wake = r);
    const bytes = this.#buffered.subarray(0, count);
    this.#buffered = this.#buffered.subarray(count);
    return bytes;
  }
  rest(): Buffer {
    return this.#buffered;
  }
}

/** A SOCKS5 proxy. A behaviour number is the SOCKS reply code it refuses CONNECT with. */
export async function startSocksProxy(options: ProxyOptions = {}): Promise<TestProxy> {
  const requests: ProxiedRequest[] = [];
  const sockets = new Sockets();
  let behaviour: ProxyBehaviour = "pass";

  async function handshake(client: net.Socket) {
    const reader = new Reader(client);
    const [, methodCount] = await reader.read(2);
    const methods = [...await reader.read(methodCount)];
    const wanted = options.login ? 2 : 0;
    if (!methods.includes(wanted)) return client.end(Buffer.from([5, 0xff]));
    client.write(Buffer.from([5, wanted]));
    let credentials: string | undefined;
    if (options.login) {
      const [, userLength] = await reader.read(2);
      const user = (await reader.read(userLength)).toString();
      const [passwordLength] = await reader.read(1);
      const password = (await reader.read(passwordLength)).toString();
      credentials = `${user}:${password}`;
      const good = user === options.login.user && password === options.login.password;
      client.write(Buffer.from([1, good ? 0 : 1]));
      if (!good) return client.end();
    }
    const [, , , type] = await reader.read(4);
    let host: string;
    if (type === 1) host = [...await reader.read(4)].join(".");
    else if (type === 3) host = (await reader.read((await reader.read(1))[0])).toString();
    else {
      const bytes = await reader.read(16);
      host = Array.from({ length: 8 }, (_, i) => bytes.readUInt16BE(2 * i).toString(16)).join(":");
    }
    const port = (await reader.read(2)).readUInt16BE(0);
    requests.push({
      method: "SOCKS",
      target: `${host}:${port}`,
      ...(credentials ? { credentials } : {}),
    });
    const reply = (code: number) => Buffer.from([5, code, 0, 1, 0, 0, 0, 0, 0, 0]);
    if (behaviour === "hang") return;
    if (typeof behaviour === "number") return client.end(reply(behaviour));
    const address = resolveIn(options.hosts, host);
    if (address === undefined) return client.end(reply(4));
    const upstream = net.connect(port, address);
    sockets.add(upstream);
    upstream.on("error", () => client.end(reply(5)));
    upstream.once("connect", () => {
      client.write(reply(0));
      client.removeAllListeners("data");
      splice(client, upstream, reader.rest());
    });
  }

  const server = net.createServer((client) => {
    sockets.add(client);
    handshake(client).catch(() => client.destroy());
  });
  const port = await listen(server);
  return {
    url: `socks5://127.0.0.1:${port}`,
    requests,
    behave: (next) => void (behaviour = next),
    close: closer(server, sockets),
  };
}
