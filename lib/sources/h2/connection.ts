/**
 * One HTTP/2 connection of a client (RFC 9113), as watches need it: GETs whose answers stream
 * for as long as the server keeps them. Many streams share the connection and one read buffer;
 * a stream keeps only its id, its handlers and its receive window. Its data is handed to its
 * handlers as it is read, and they take it at once, so a window only bounds what the server
 * may send ahead: the windows are opened again as soon as half is used, and nothing is buffered
 * for a slow reader.
 *
 * Liveness as Go's HTTP/2 transport, under client-go's settings, checks it: a connection silent
 * for READ_IDLE_MS is sent a PING, and dropped if its answer does not come within PING_TIMEOUT_MS,
 * so a peer gone without a word fails the connection's streams in under a minute.
 */
import { concatBytes } from "../../util/bytes.ts";
import { realTimers, type Timers } from "../../util/timers.ts";
import { encodeHeaders, type HeaderField, HpackDecoder, HpackError } from "./hpack.ts";

/** client-go's HTTP2_READ_IDLE_TIMEOUT_SECONDS and HTTP2_PING_TIMEOUT_SECONDS defaults. */
export const READ_IDLE_MS = 30_000;
export const PING_TIMEOUT_MS = 15_000;
/** How long the last frames and the GOAWAY of a connection we close may take to be written. */
export const GOAWAY_WRITE_MS = 5_000;

export const FrameType = {
  DATA: 0x0,
  HEADERS: 0x1,
  PRIORITY: 0x2,
  RST_STREAM: 0x3,
  SETTINGS: 0x4,
  PUSH_PROMISE: 0x5,
  PING: 0x6,
  GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8,
  CONTINUATION: 0x9,
} as const;

export const Flag = {
  END_STREAM: 0x1,
  ACK: 0x1,
  END_HEADERS: 0x4,
  PADDED: 0x8,
  PRIORITY: 0x20,
} as const;

export const Setting = {
  HEADER_TABLE_SIZE: 0x1,
  ENABLE_PUSH: 0x2,
  MAX_CONCURRENT_STREAMS: 0x3,
  INITIAL_WINDOW_SIZE: 0x4,
  MAX_FRAME_SIZE: 0x5,
  MAX_HEADER_LIST_SIZE: 0x6,
} as const;

export const ErrorCode = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  FLOW_CONTROL_ERROR: 0x3,
  STREAM_CLOSED: 0x5,
  FRAME_SIZE_ERROR: 0x6,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  COMPRESSION_ERROR: 0x9,
} as const;

const ERROR_NAMES = [
  "NO_ERROR",
  "PROTOCOL_ERROR",
  "INTERNAL_ERROR",
  "FLOW_CONTROL_ERROR",
  "SETTINGS_TIMEOUT",
  "STREAM_CLOSED",
  "FRAME_SIZE_ERROR",
  "REFUSED_STREAM",
  "CANCEL",
  "COMPRESSION_ERROR",
  "CONNECT_ERROR",
  "ENHANCE_YOUR_CALM",
  "INADEQUATE_SECURITY",
  "HTTP_1_1_REQUIRED",
];

export function errorName(code: number): string {
  return ERROR_NAMES[code] ?? `error 0x${code.toString(16)}`;
}

export const PREFACE = new TextEncoder().encode("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
const FRAME_HEADER_BYTES = 9;
/** The largest frame we take: the protocol's default, which we do not raise. */
const MAX_FRAME_BYTES = 16_384;
/** Twice a whole frame: a frame started at the end of a read fits after it is moved down. */
const READ_BUFFER_BYTES = 2 * (FRAME_HEADER_BYTES + MAX_FRAME_BYTES);
/** What a stream may receive ahead of its reader: an event of a large object in a few turns. */
export const STREAM_WINDOW = 1 << 20;
/** What all of a connection's streams may receive ahead of their readers. */
export const CONNECTION_WINDOW = 8 << 20;
/** The protocol's window before SETTINGS change it (RFC 9113 §6.9.2). */
const DEFAULT_WINDOW = 65_535;
/** A response's fields are a few hundred bytes; far more is no API server's. */
const MAX_HEADER_LIST_BYTES = 64 * 1024;
const MAX_STREAM_ID = 2 ** 31 - 1;

/** Writes one frame's 9-byte header and payload into a new array. */
export function frame(
  type: number,
  flags: number,
  streamId: number,
  payload: Uint8Array = new Uint8Array(),
): Uint8Array {
  const out = new Uint8Array(FRAME_HEADER_BYTES + payload.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, payload.length << 8);
  view.setUint8(3, type);
  view.setUint8(4, flags);
  view.setUint32(5, streamId & MAX_STREAM_ID);
  out.set(payload, FRAME_HEADER_BYTES);
  return out;
}

export function settingsPayload(settings: [number, number][]): Uint8Array {
  const out = new Uint8Array(6 * settings.length);
  const view = new DataView(out.buffer);
  settings.forEach(([id, value], i) => {
    view.setUint16(6 * i, id);
    view.setUint32(6 * i + 2, value);
  });
  return out;
}

export function uint32Payload(...values: number[]): Uint8Array {
  const out = new Uint8Array(4 * values.length);
  const view = new DataView(out.buffer);
  values.forEach((value, i) => view.setUint32(4 * i, value));
  return out;
}

/** How a stream failed: reset, refused, its connection lost or going away. */
export class H2StreamError extends Error {}

export interface StreamHandlers {
  /** The response's head (informational 1xx heads are skipped). */
  response(status: number, fields: HeaderField[]): void;
  /** Bytes of the body: a view of the read buffer, to be taken before returning. */
  data(bytes: Uint8Array): void;
  /** The server ended the stream after its response. */
  end(): void;
  /** The stream failed: reset, its connection lost, or refused. Told at most once. */
  failed(error: H2StreamError): void;
}

export interface H2Stream {
  /** Ends the stream (RST_STREAM CANCEL); its handlers are told nothing more. */
  cancel(): void;
}

interface StreamState {
  readonly id: number;
  readonly on: StreamHandlers;
  responded: boolean;
  /** What the server may still send before we open the window again. */
  window: number;
  /** Taken since the window was last opened. */
  taken: number;
}

/** A connection error (RFC 9113 §5.4.1): the connection ends, with a GOAWAY saying why. */
class ConnectionError extends Error {
  constructor(readonly code: number, message: string) {
    super(message);
  }
}

export interface H2ConnectionEvents {
  /** The server's first SETTINGS came: streams may be opened. */
  ready(): void;
  /** Room for streams changed: a stream ended, SETTINGS or GOAWAY came, or the connection
   *  closed. */
  changed(): void;
}

export class H2Connection {
  readonly #conn: Deno.Conn;
  readonly #timers: Timers;
  readonly #events: H2ConnectionEvents;
  readonly #streams = new Map<number, StreamState>();
  readonly #decoder = new HpackDecoder();
  #nextStreamId = 1;
  /** The server's MAX_CONCURRENT_STREAMS; unlimited until it says. */
  #maxStreams = Infinity;
  #peerMaxFrame = MAX_FRAME_BYTES;
  #ready = false;
  /** After a GOAWAY (or with stream ids used up): no new stream. */
  #draining = false;
  #closed = false;
  /** Why the connection closed, told to streams opened after. */
  #closedBecause = "";
  #window = CONNECTION_WINDOW;
  #taken = 0;
  /** A header block being received: HEADERS then CONTINUATIONs of one stream. */
  #block: { streamId: number; endStream: boolean; parts: Uint8Array[]; size: number } | undefined;
  #lastRead: number;
  #cancelIdle: () => void = () => {};
  #cancelPing: (() => void) | undefined;
  #pingCount = 0;
  #writes: Uint8Array[] = [];
  #writing = false;
  /** The flush under way, or a settled promise: a GOAWAY is written only after it. */
  #flushed: Promise<void> = Promise.resolve();

  constructor(conn: Deno.Conn, events: H2ConnectionEvents, timers: Timers = realTimers) {
    this.#conn = conn;
    this.#events = events;
    this.#timers = timers;
    this.#lastRead = timers.now();
    this.#send(
      PREFACE,
      frame(
        FrameType.SETTINGS,
        0,
        0,
        settingsPayload([
          [Setting.ENABLE_PUSH, 0],
          [Setting.INITIAL_WINDOW_SIZE, STREAM_WINDOW],
          [Setting.MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST_BYTES],
        ]),
      ),
      frame(FrameType.WINDOW_UPDATE, 0, 0, uint32Payload(CONNECTION_WINDOW - DEFAULT_WINDOW)),
    );
    this.#armIdle(READ_IDLE_MS);
    void this.#readLoop();
  }

  /** Streams open now. */
  get streams(): number {
    return this.#streams.size;
  }

  /** How many streams the server allows at once, as it said in its SETTINGS. */
  get maxStreams(): number {
    return this.#maxStreams;
  }

  get ready(): boolean {
    return this.#ready;
  }

  /** Takes no new streams: going away, closed, or out of stream ids. */
  get closing(): boolean {
    return this.#draining || this.#closed;
  }

  /** Opens a stream with a GET's fields; its END_STREAM is on the HEADERS. */
  request(fields: readonly HeaderField[], on: StreamHandlers): H2Stream {
    if (this.closing) {
      const reason = this.#closed ? this.#closedBecause : "connection going away";
      queueMicrotask(() => on.failed(new H2StreamError(reason)));
      return { cancel() {} };
    }
    const id = this.#nextStreamId;
    this.#nextStreamId += 2;
    if (this.#nextStreamId > MAX_STREAM_ID) this.#draining = true;
    const stream: StreamState = { id, on, responded: false, window: STREAM_WINDOW, taken: 0 };
    this.#streams.set(id, stream);
    this.#sendHeaders(id, encodeHeaders(fields));
    return {
      cancel: () => {
        if (this.#streams.get(id) !== stream) return;
        this.#forget(id);
        if (!this.#closed) {
          this.#send(frame(FrameType.RST_STREAM, 0, id, uint32Payload(ErrorCode.CANCEL)));
        }
      },
    };
  }

  /** Closes the connection: its streams fail (after the caller's turn, so that an owner that
   *  closes its watches next is told nothing of them). */
  close(reason = "connection closed"): void {
    this.#shut(reason, ErrorCode.NO_ERROR);
  }

  /** A header block split to the server's frame size: HEADERS, then CONTINUATIONs. */
  #sendHeaders(id: number, block: Uint8Array) {
    const frames: Uint8Array[] = [];
    for (let at = 0; at === 0 || at < block.length; at += this.#peerMaxFrame) {
      const part = block.subarray(at, at + this.#peerMaxFrame);
      const last = at + this.#peerMaxFrame >= block.length;
      frames.push(
        frame(
          at === 0 ? FrameType.HEADERS : FrameType.CONTINUATION,
          (at === 0 ? Flag.END_STREAM : 0) | (last ? Flag.END_HEADERS : 0),
          id,
          part,
        ),
      );
    }
    this.#send(...frames);
  }

  #send(...frames: Uint8Array[]) {
    if (this.#closed) return;
    this.#writes.push(...frames);
    if (!this.#writing) this.#flushed = this.#flush();
  }

  async #flush() {
    this.#writing = true;
    try {
      while (this.#writes.length > 0 && !this.#closed) {
        const batch = this.#writes;
        this.#writes = [];
        await writeAll(this.#conn, concat(batch));
      }
    } catch (e) {
      this.#shut(`write failed: ${e instanceof Error ? e.message : String(e)}`);
    } finally {
      this.#writing = false;
    }
  }

  async #readLoop() {
    const buffer = new Uint8Array(READ_BUFFER_BYTES);
    let start = 0;
    let end = 0;
    try {
      for (;;) {
        const read = await this.#conn.read(buffer.subarray(end));
        if (this.#closed) return;
        if (read === null) throw new Error("connection closed by the server");
        end += read;
        this.#lastRead = this.#timers.now();
        while (end - start >= FRAME_HEADER_BYTES && !this.#closed) {
          const length = (buffer[start] << 16) | (buffer[start + 1] << 8) | buffer[start + 2];
          if (length > MAX_FRAME_BYTES) {
            throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, `frame of ${length} bytes`);
          }
          if (end - start < FRAME_HEADER_BYTES + length) break;
          const type = buffer[start + 3];
          const flags = buffer[start + 4];
          const streamId = new DataView(buffer.buffer, start + 5, 4).getUint32(0) & MAX_STREAM_ID;
          const payload = buffer.subarray(
            start + FRAME_HEADER_BYTES,
            start + FRAME_HEADER_BYTES + length,
          );
          start += FRAME_HEADER_BYTES + length;
          this.#frame(type, flags, streamId, payload);
        }
        if (start === end) start = end = 0;
        else if (start > 0) {
          buffer.copyWithin(0, start, end);
          end -= start;
          start = 0;
        }
      }
    } catch (e) {
      if (this.#closed) return;
      if (e instanceof ConnectionError) this.#shut(e.message, e.code);
      else this.#shut(e instanceof Error ? e.message : String(e));
    }
  }

  #frame(type: number, flags: number, streamId: number, payload: Uint8Array) {
    if (this.#block && type !== FrameType.CONTINUATION) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "header block interrupted");
    }
    switch (type) {
      case FrameType.DATA:
        return this.#data(flags, streamId, payload);
      case FrameType.HEADERS:
        return this.#headers(flags, streamId, payload);
      case FrameType.CONTINUATION:
        return this.#continuation(flags, streamId, payload);
      case FrameType.RST_STREAM:
        return this.#reset(streamId, payload);
      case FrameType.SETTINGS:
        return this.#settings(flags, streamId, payload);
      case FrameType.PING:
        return this.#ping(flags, streamId, payload);
      case FrameType.GOAWAY:
        return this.#goAway(streamId, payload);
      case FrameType.WINDOW_UPDATE:
        // We send no DATA: the server's windows for us do not matter. Checked all the same.
        if (payload.length !== 4) throw frameSize("WINDOW_UPDATE");
        return;
      case FrameType.PUSH_PROMISE:
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "PUSH_PROMISE with push disabled");
      case FrameType.PRIORITY:
        if (payload.length !== 5) throw frameSize("PRIORITY");
        return;
      default:
        // Unknown frame types are ignored (RFC 9113 §4.1).
        return;
    }
  }

  /** A stream id the server names must be one we opened. */
  #checkStream(streamId: number, what: string) {
    if (streamId === 0 || streamId % 2 === 0 || streamId >= this.#nextStreamId) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `${what} on stream ${streamId}`);
    }
  }

  #data(flags: number, streamId: number, payload: Uint8Array) {
    this.#checkStream(streamId, "DATA");
    // Padding counts against the windows (RFC 9113 §6.1).
    this.#window -= payload.length;
    this.#taken += payload.length;
    if (this.#window < 0) {
      throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "connection window overrun");
    }
    const stream = this.#streams.get(streamId);
    if (stream) {
      const body = unpad(flags, payload, "DATA");
      stream.window -= payload.length;
      stream.taken += payload.length;
      if (stream.window < 0) {
        this.#streamError(stream, ErrorCode.FLOW_CONTROL_ERROR, "stream window overrun");
      } else if (!stream.responded) {
        this.#streamError(stream, ErrorCode.PROTOCOL_ERROR, "DATA before the response");
      } else {
        if (body.length > 0) stream.on.data(body);
        if (flags & Flag.END_STREAM) this.#ended(stream);
        else if (this.#streams.has(streamId) && stream.taken >= STREAM_WINDOW / 2) {
          this.#send(frame(FrameType.WINDOW_UPDATE, 0, streamId, uint32Payload(stream.taken)));
          stream.window += stream.taken;
          stream.taken = 0;
        }
      }
    }
    if (this.#taken >= CONNECTION_WINDOW / 2 && !this.#closed) {
      this.#send(frame(FrameType.WINDOW_UPDATE, 0, 0, uint32Payload(this.#taken)));
      this.#window += this.#taken;
      this.#taken = 0;
    }
  }

  #headers(flags: number, streamId: number, payload: Uint8Array) {
    this.#checkStream(streamId, "HEADERS");
    let fragment = unpad(flags, payload, "HEADERS");
    if (flags & Flag.PRIORITY) {
      if (fragment.length < 5) throw frameSize("HEADERS");
      fragment = fragment.subarray(5);
    }
    // A copy: the read buffer is used again before the block is whole.
    this.#block = {
      streamId,
      endStream: (flags & Flag.END_STREAM) !== 0,
      parts: [fragment.slice()],
      size: fragment.length,
    };
    if (flags & Flag.END_HEADERS) this.#blockDone();
  }

  #continuation(flags: number, streamId: number, payload: Uint8Array) {
    const block = this.#block;
    if (!block || block.streamId !== streamId) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "CONTINUATION out of place");
    }
    block.size += payload.length;
    if (block.size > MAX_HEADER_LIST_BYTES) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "header block too large");
    }
    block.parts.push(payload.slice());
    if (flags & Flag.END_HEADERS) this.#blockDone();
  }

  #blockDone() {
    const block = this.#block!;
    this.#block = undefined;
    let fields: HeaderField[];
    try {
      // Decoded even for a stream we no longer want: the table is the connection's.
      fields = this.#decoder.decode(concat(block.parts), MAX_HEADER_LIST_BYTES);
    } catch (e) {
      if (e instanceof HpackError) {
        throw new ConnectionError(ErrorCode.COMPRESSION_ERROR, `HPACK: ${e.message}`);
      }
      throw e;
    }
    const stream = this.#streams.get(block.streamId);
    if (!stream) return;
    if (!stream.responded) {
      const status = Number(fields.find(([name]) => name === ":status")?.[1]);
      if (!Number.isInteger(status) || status < 100 || status > 999) {
        return this.#streamError(stream, ErrorCode.PROTOCOL_ERROR, "response without :status");
      }
      // An informational head is followed by the real one.
      if (status < 200) {
        if (block.endStream) {
          this.#streamError(stream, ErrorCode.PROTOCOL_ERROR, "stream ended after a 1xx");
        }
        return;
      }
      stream.responded = true;
      stream.on.response(status, fields);
      if (!this.#streams.has(stream.id)) return;
    } else if (!block.endStream) {
      // Trailers must end the stream (RFC 9113 §8.1).
      return this.#streamError(stream, ErrorCode.PROTOCOL_ERROR, "trailers without END_STREAM");
    }
    if (block.endStream) this.#ended(stream);
  }

  #reset(streamId: number, payload: Uint8Array) {
    this.#checkStream(streamId, "RST_STREAM");
    if (payload.length !== 4) throw frameSize("RST_STREAM");
    const stream = this.#streams.get(streamId);
    if (!stream) return;
    const code = new DataView(payload.buffer, payload.byteOffset, 4).getUint32(0);
    this.#forget(streamId);
    stream.on.failed(
      new H2StreamError(`stream reset by the server (${errorName(code)})`),
    );
  }

  #settings(flags: number, streamId: number, payload: Uint8Array) {
    if (streamId !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "SETTINGS on a stream");
    if (flags & Flag.ACK) {
      if (payload.length !== 0) throw frameSize("SETTINGS ack");
      return;
    }
    if (payload.length % 6 !== 0) throw frameSize("SETTINGS");
    const view = new DataView(payload.buffer, payload.byteOffset, payload.length);
    for (let at = 0; at < payload.length; at += 6) {
      const id = view.getUint16(at);
      const value = view.getUint32(at + 2);
      if (id === Setting.MAX_CONCURRENT_STREAMS) this.#maxStreams = value;
      else if (id === Setting.INITIAL_WINDOW_SIZE && value > MAX_STREAM_ID) {
        throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "initial window too large");
      } else if (id === Setting.MAX_FRAME_SIZE) {
        if (value < MAX_FRAME_BYTES || value > 2 ** 24 - 1) {
          throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `max frame size ${value}`);
        }
        this.#peerMaxFrame = value;
      } else if (id === Setting.ENABLE_PUSH && value > 1) {
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `enable push ${value}`);
      }
      // HEADER_TABLE_SIZE bounds a table our encoder never uses; the others are advisory.
    }
    this.#send(frame(FrameType.SETTINGS, Flag.ACK, 0));
    if (!this.#ready) {
      this.#ready = true;
      this.#events.ready();
    }
    this.#events.changed();
  }

  #ping(flags: number, streamId: number, payload: Uint8Array) {
    if (streamId !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "PING on a stream");
    if (payload.length !== 8) throw frameSize("PING");
    if (!(flags & Flag.ACK)) {
      this.#send(frame(FrameType.PING, Flag.ACK, 0, payload.slice()));
      return;
    }
    const count = new DataView(payload.buffer, payload.byteOffset, 8).getUint32(4);
    if (this.#cancelPing && count === this.#pingCount) {
      this.#cancelPing();
      this.#cancelPing = undefined;
      this.#armIdle(READ_IDLE_MS);
    }
  }

  #goAway(streamId: number, payload: Uint8Array) {
    if (streamId !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "GOAWAY on a stream");
    if (payload.length < 8) throw frameSize("GOAWAY");
    const view = new DataView(payload.buffer, payload.byteOffset, 8);
    const last = view.getUint32(0) & MAX_STREAM_ID;
    const code = view.getUint32(4);
    this.#draining = true;
    // Streams above the last were never processed: asked again, elsewhere.
    for (const stream of [...this.#streams.values()]) {
      if (stream.id <= last) continue;
      this.#forget(stream.id);
      stream.on.failed(
        new H2StreamError(`server going away (GOAWAY ${errorName(code)})`),
      );
    }
    this.#events.changed();
    if (this.#streams.size === 0) this.close("server went away");
  }

  /** The server ended a stream. */
  #ended(stream: StreamState) {
    this.#forget(stream.id);
    stream.on.end();
  }

  /** A stream error (RFC 9113 §5.4.2): that stream is reset, the others go on. */
  #streamError(stream: StreamState, code: number, message: string) {
    this.#forget(stream.id);
    this.#send(frame(FrameType.RST_STREAM, 0, stream.id, uint32Payload(code)));
    stream.on.failed(new H2StreamError(`${message} (${errorName(code)})`));
  }

  #forget(id: number) {
    if (!this.#streams.delete(id)) return;
    if (this.#draining && this.#streams.size === 0) this.close("server went away");
    else this.#events.changed();
  }

  /** After READ_IDLE_MS without a frame, a PING; without its answer in PING_TIMEOUT_MS, the
   *  connection is dead. */
  #armIdle(ms: number) {
    this.#cancelIdle();
    this.#cancelIdle = this.#timers.after(ms, () => {
      if (this.#closed) return;
      const silent = this.#timers.now() - this.#lastRead;
      if (silent < READ_IDLE_MS) return this.#armIdle(READ_IDLE_MS - silent);
      this.#pingCount++;
      this.#send(frame(FrameType.PING, 0, 0, uint32Payload(0, this.#pingCount)));
      this.#cancelPing = this.#timers.after(PING_TIMEOUT_MS, () => {
        this.#shut(`no answer to a PING within ${PING_TIMEOUT_MS} ms`);
      });
    });
  }

  /** Ends the connection: a GOAWAY saying why when it is our doing, then every stream fails. */
  #shut(reason: string, code?: number) {
    if (this.#closed) return;
    if (code !== undefined) {
      const conn = this.#conn;
      const last = concat([...this.#writes, frame(FrameType.GOAWAY, 0, 0, uint32Payload(0, code))]);
      // After the write under way (a short write leaves the rest of its frames to come), so that
      // the server never reads the GOAWAY inside a frame; bounded, as a peer that reads nothing
      // would otherwise hold the connection open.
      const cancel = this.#timers.after(GOAWAY_WRITE_MS, () => closeQuietly(conn));
      this.#flushed
        .then(() => writeAll(conn, last))
        .catch(() => {})
        .finally(() => {
          cancel();
          closeQuietly(conn);
        });
    }
    this.#closed = true;
    this.#closedBecause = code === undefined || code === ErrorCode.NO_ERROR
      ? reason
      : `${reason} (${errorName(code)})`;
    this.#writes = [];
    this.#cancelIdle();
    this.#cancelPing?.();
    if (code === undefined) closeQuietly(this.#conn);
    const streams = [...this.#streams.values()];
    this.#streams.clear();
    const error = new H2StreamError(this.#closedBecause);
    queueMicrotask(() => {
      for (const stream of streams) stream.on.failed(error);
      this.#events.changed();
    });
  }
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array) {
  while (bytes.length > 0) bytes = bytes.subarray(await conn.write(bytes));
}

function closeQuietly(conn: Deno.Conn) {
  try {
    conn.close();
  } catch {
    // Closed already.
  }
}

function frameSize(what: string): ConnectionError {
  return new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, `${what} of a wrong size`);
}

/** A DATA or HEADERS payload without its padding (RFC 9113 §6.1). */
function unpad(flags: number, payload: Uint8Array, what: string): Uint8Array {
  if (!(flags & Flag.PADDED)) return payload;
  if (payload.length < 1) throw frameSize(what);
  const pad = payload[0];
  if (pad >= payload.length) {
    throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `${what} padding past its end`);
  }
  return payload.subarray(1, payload.length - pad);
}

function concat(parts: Uint8Array[]): Uint8Array {
  return parts.length === 1 ? parts[0] : concatBytes(parts);
}
