/**
 * What systemd's notification socket receives: a real unix datagram socket, bound at a path or
 * an abstract name, that keeps every message in order.
 */

/** An abstract socket name of this test run's own, as NOTIFY_SOCKET writes it. */
export function abstractName(): string {
  return `@ckpt-agent-test-${Deno.pid}-${crypto.randomUUID()}`;
}

/** Waits give up after this long: a safety bound against a hung test, never a timing check. */
const GIVE_UP_MS = 60_000;

export class NotifyInbox {
  readonly messages: string[] = [];
  readonly #conn: Deno.DatagramConn;
  readonly #path: string;
  #seen = 0;
  #wake: () => void = () => {};
  readonly #reading: Promise<void>;

  /** `address`: a path, or `@name` for an abstract socket. */
  constructor(readonly address: string) {
    this.#path = address.startsWith("@") ? `\0${address.slice(1)}` : address;
    const conn = Deno.listenDatagram({ transport: "unixpacket", path: this.#path });
    this.#conn = conn;
    this.#reading = (async () => {
      for await (const [data] of conn) {
        this.messages.push(new TextDecoder().decode(data));
        this.#wake();
      }
    })().catch(() => {});
  }

  /** Waits until `done(messages)`; throws, naming what came, if it never is. */
  async until(what: string, done: (messages: string[]) => boolean): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const giveUp = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`never got ${what}; got ${JSON.stringify(this.messages)}`)),
        GIVE_UP_MS,
      );
    });
    try {
      while (!done(this.messages)) {
        await Promise.race([new Promise<void>((resolve) => this.#wake = resolve), giveUp]);
      }
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * What came since the last call, up to a marker sent now: everything sent before this call
   * (and out of its sender) is in, and nothing can still be on its way.
   */
  async since(): Promise<string[]> {
    const marker = `MARKER=${crypto.randomUUID()}`;
    const sender = Deno.listenDatagram({ transport: "unixpacket" });
    try {
      await sender.send(new TextEncoder().encode(marker), {
        transport: "unixpacket",
        path: this.#path,
      });
    } finally {
      sender.close();
    }
    await this.until(marker, (messages) => messages.includes(marker));
    const end = this.messages.indexOf(marker);
    const got = this.messages.slice(this.#seen, end);
    this.#seen = end + 1;
    return got;
  }

  async close() {
    this.#conn.close();
    await this.#reading;
    if (!this.address.startsWith("@")) await Deno.remove(this.address).catch(() => {});
  }
}
