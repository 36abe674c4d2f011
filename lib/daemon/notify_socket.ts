/**
 * The socket systemd's notifications go to (sd_notify(3)): NOTIFY_SOCKET names a unix datagram
 * socket by its path, or, starting with `@`, by an abstract name; each message is one datagram of
 * `KEY=value` lines.
 *
 * Deno sends a unix datagram only through `Deno.listenDatagram({ transport: "unixpacket" })` (a
 * SOCK_DGRAM socket, whatever the name says), left unbound: it then sends without a path of its
 * own. That API is behind Deno's unstable "net" feature, which deno.json turns on for every way
 * the agent runs (tasks, tests, `deno run`, and the compiled binary, which bakes it in). Sending
 * needs write and net access to the socket's path, which the agent has. node:dgram knows no unix
 * sockets, and FFI to libc would need --allow-ffi, which is all of the process: docs/building.md.
 */

export interface NotifyAddress {
  /** As the kernel takes it: an abstract name starts with a NUL byte. */
  path: string;
  /** As NOTIFY_SOCKET says it. */
  shown: string;
}

/** The socket NOTIFY_SOCKET names, or why it cannot be used. */
export function notifyAddress(value: string): NotifyAddress | { problem: string } {
  if (value.startsWith("/")) return { path: value, shown: value };
  if (value.startsWith("@") && value.length > 1) {
    return { path: `\0${value.slice(1)}`, shown: value };
  }
  return {
    problem: `NOTIFY_SOCKET=${JSON.stringify(value)} is neither an absolute path nor @name ` +
      "(an abstract socket): the only kinds this agent can send to",
  };
}

export class NotifySocket {
  #conn?: Deno.DatagramConn;

  constructor(readonly address: NotifyAddress) {}

  /** Sends one message; rejects when it cannot (the socket gone, the API missing). */
  async send(message: string): Promise<void> {
    this.#conn ??= unboundDatagramSocket();
    await this.#conn.send(new TextEncoder().encode(message), {
      transport: "unixpacket",
      path: this.address.path,
    });
  }

  close() {
    this.#conn?.close();
    this.#conn = undefined;
  }
}

function unboundDatagramSocket(): Deno.DatagramConn {
  // Typed as always there; at run time only with the unstable net feature.
  if (typeof Deno.listenDatagram !== "function") {
    throw new Error(
      "Deno.listenDatagram is missing: this Deno runs without the unstable net feature " +
        '(deno.json "unstable": ["net"], or --unstable-net)',
    );
  }
  return Deno.listenDatagram({ transport: "unixpacket" });
}
