/**
 * HPACK (RFC 7541), as a client of the API server needs it: a decoder that takes whatever a
 * server sends (indexed fields, literals with and without indexing, dynamic table size updates,
 * Huffman-coded strings), and an encoder that sends literals without indexing, which keeps the
 * server's table for us empty and needs no state.
 */

/** A header field, its name in lower case as HTTP/2 requires. */
export type HeaderField = readonly [name: string, value: string];

/** A header block that breaks RFC 7541: a connection error of type COMPRESSION_ERROR. */
export class HpackError extends Error {}

/** RFC 7541 Appendix A. */
const STATIC_TABLE: readonly HeaderField[] = [
  [":authority", ""],
  [":method", "GET"],
  [":method", "POST"],
  [":path", "/"],
  [":path", "/index.html"],
  [":scheme", "http"],
  [":scheme", "https"],
  [":status", "200"],
  [":status", "204"],
  [":status", "206"],
  [":status", "304"],
  [":status", "400"],
  [":status", "404"],
  [":status", "500"],
  ["accept-charset", ""],
  ["accept-encoding", "gzip, deflate"],
  ...[
    "accept-language",
    "accept-ranges",
    "accept",
    "access-control-allow-origin",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "content-disposition",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-range",
    "content-type",
    "cookie",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "link",
    "location",
    "max-forwards",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "refresh",
    "retry-after",
    "server",
    "set-cookie",
    "strict-transport-security",
    "transfer-encoding",
    "user-agent",
    "vary",
    "via",
    "www-authenticate",
  ].map((name): HeaderField => [name, ""]),
];

/**
 * The bit length of each symbol's Huffman code, 0 to 255 then EOS (RFC 7541 Appendix B). The
 * code is canonical: codes of one length are consecutive in symbol order, each length's first
 * following the last of the length before, so the lengths alone give every code.
 */
// deno-fmt-ignore
const HUFFMAN_LENGTHS = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
  28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
  6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
  5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
  13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
  7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
  15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,
  6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
  20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
  24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
  22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
  21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
  26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
  19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
  20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
  26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
  30,
];

const EOS = 256;

/**
 * The decoding tree of the canonical code, as flat arrays: node n's children are
 * `CHILD[2n]` (bit 0) and `CHILD[2n + 1]` (bit 1); a child below 0 is the leaf of symbol
 * `-child - 1`; 0 is no child (the root is never a child).
 */
const HUFFMAN_TREE = (() => {
  const order = HUFFMAN_LENGTHS.map((_, symbol) => symbol)
    .sort((a, b) => HUFFMAN_LENGTHS[a] - HUFFMAN_LENGTHS[b] || a - b);
  const child = new Int32Array(2 * 2 * HUFFMAN_LENGTHS.length);
  let nodes = 1;
  let code = 0;
  let length = HUFFMAN_LENGTHS[order[0]];
  for (const symbol of order) {
    code <<= HUFFMAN_LENGTHS[symbol] - length;
    length = HUFFMAN_LENGTHS[symbol];
    let node = 0;
    for (let bit = length - 1; bit >= 0; bit--) {
      const slot = 2 * node + ((code >>> bit) & 1);
      if (bit === 0) child[slot] = -symbol - 1;
      else {
        if (child[slot] === 0) child[slot] = nodes++;
        node = child[slot];
      }
    }
    code++;
  }
  return child;
})();

/** Decodes a Huffman-coded string (RFC 7541 §5.2), refusing bad padding and EOS. */
export function huffmanDecode(bytes: Uint8Array): string {
  const out: number[] = [];
  let node = 0;
  /** Bits read since the last symbol, all ones so far: what padding may be. */
  let pending = 0;
  let allOnes = true;
  for (const byte of bytes) {
    for (let bit = 7; bit >= 0; bit--) {
      const one = (byte >>> bit) & 1;
      pending++;
      allOnes &&= one === 1;
      const next = HUFFMAN_TREE[2 * node + one];
      if (next < 0) {
        const symbol = -next - 1;
        if (symbol === EOS) throw new HpackError("Huffman string holds EOS");
        out.push(symbol);
        node = 0;
        pending = 0;
        allOnes = true;
      } else node = next;
    }
  }
  if (pending > 7 || !allOnes) throw new HpackError("Huffman string badly padded");
  return new TextDecoder().decode(new Uint8Array(out));
}

/** An entry's size in a table: its name's and value's octets and 32 (RFC 7541 §4.1). */
function entrySize([name, value]: HeaderField): number {
  return byteLength(name) + byteLength(value) + 32;
}

const encoder = new TextEncoder();

function byteLength(text: string): number {
  // Header fields are mostly ASCII: only count the slow way when they are not.
  for (let i = 0; i < text.length; i++) {
    if (text.charCodeAt(i) > 0x7f) return encoder.encode(text).length;
  }
  return text.length;
}

/**
 * One connection's decoding context: the dynamic table the server's encoder fills, bounded by
 * the table size we announced (SETTINGS_HEADER_TABLE_SIZE; 4,096 by default).
 */
export class HpackDecoder {
  /** Newest first, as indexes count. */
  #table: HeaderField[] = [];
  #size = 0;
  #maxSize: number;
  readonly #limit: number;

  constructor(maxTableSize = 4096) {
    this.#maxSize = maxTableSize;
    this.#limit = maxTableSize;
  }

  /** The dynamic table's size now, for tests. */
  get tableSize(): number {
    return this.#size;
  }

  /** The dynamic table, newest first, for tests. */
  get table(): readonly HeaderField[] {
    return this.#table;
  }

  /** Decodes one whole header block; any error leaves the context unusable (the connection
   *  must end). `maxListSize`: the most the fields may take, counted as entries are. */
  decode(block: Uint8Array, maxListSize = Infinity): HeaderField[] {
    const fields: HeaderField[] = [];
    let listSize = 0;
    const reader = { block, at: 0 };
    let fieldSeen = false;
    while (reader.at < block.length) {
      const first = block[reader.at];
      let field: HeaderField;
      if (first & 0x80) {
        field = this.#entry(readInteger(reader, 7));
      } else if (first & 0x40) {
        field = this.#literal(reader, 6);
        this.#add(field);
      } else if (first & 0x20) {
        // A size update is allowed only at the start of a block (RFC 7541 §4.2).
        if (fieldSeen) throw new HpackError("table size update after a header field");
        const size = readInteger(reader, 5);
        if (size > this.#limit) throw new HpackError(`table size ${size} above ${this.#limit}`);
        this.#maxSize = size;
        this.#evict(0);
        continue;
      } else {
        // Without indexing (0000) or never indexed (0001): the same to a decoder.
        field = this.#literal(reader, 4);
      }
      fieldSeen = true;
      listSize += entrySize(field);
      if (listSize > maxListSize) throw new HpackError(`header list above ${maxListSize} bytes`);
      fields.push(field);
    }
    return fields;
  }

  #entry(index: number): HeaderField {
    if (index === 0) throw new HpackError("index 0");
    if (index <= STATIC_TABLE.length) return STATIC_TABLE[index - 1];
    const field = this.#table[index - STATIC_TABLE.length - 1];
    if (field === undefined) throw new HpackError(`index ${index} past the tables`);
    return field;
  }

  #literal(reader: Reader, prefix: number): HeaderField {
    const index = readInteger(reader, prefix);
    const name = index === 0 ? readString(reader) : this.#entry(index)[0];
    return [name, readString(reader)];
  }

  #add(field: HeaderField) {
    const size = entrySize(field);
    this.#evict(size);
    // An entry larger than the whole table empties it and is not added (RFC 7541 §4.4).
    if (size > this.#maxSize) return;
    this.#table.unshift(field);
    this.#size += size;
  }

  /** Evicts the oldest entries until `room` more fits. */
  #evict(room: number) {
    while (this.#size + room > this.#maxSize && this.#table.length > 0) {
      this.#size -= entrySize(this.#table.pop()!);
    }
  }
}

interface Reader {
  block: Uint8Array;
  at: number;
}

/** An integer of RFC 7541 §5.1, its first octet's low `prefix` bits first. */
function readInteger(reader: Reader, prefix: number): number {
  const max = (1 << prefix) - 1;
  let value = reader.block[reader.at++] & max;
  if (value < max) return value;
  let shift = 0;
  for (;;) {
    if (reader.at >= reader.block.length) throw new HpackError("integer cut short");
    const byte = reader.block[reader.at++];
    value += (byte & 0x7f) * 2 ** shift;
    shift += 7;
    if (value > 2 ** 32) throw new HpackError("integer too large");
    if ((byte & 0x80) === 0) return value;
  }
}

/** A string literal of RFC 7541 §5.2, plain or Huffman-coded. */
function readString(reader: Reader): string {
  if (reader.at >= reader.block.length) throw new HpackError("string cut short");
  const huffman = (reader.block[reader.at] & 0x80) !== 0;
  const length = readInteger(reader, 7);
  const end = reader.at + length;
  if (end > reader.block.length) throw new HpackError("string cut short");
  const bytes = reader.block.subarray(reader.at, end);
  reader.at = end;
  return huffman ? huffmanDecode(bytes) : new TextDecoder().decode(bytes);
}

/** Fields no intermediary may put in a table (RFC 7541 §7.1.3): credentials. */
const NEVER_INDEXED = new Set(["authorization", "proxy-authorization", "cookie"]);

/**
 * Encodes fields as literals without indexing (RFC 7541 §6.2.2), or never indexed for
 * credentials (§6.2.3), names by their static index where the static table has them, strings
 * plain: the server keeps no state for us.
 */
export function encodeHeaders(fields: readonly HeaderField[]): Uint8Array {
  const out: number[] = [];
  for (const [name, value] of fields) {
    const index = STATIC_TABLE.findIndex(([n]) => n === name) + 1;
    writeInteger(out, NEVER_INDEXED.has(name) ? 0x10 : 0x00, 4, index);
    if (index === 0) writeString(out, name);
    writeString(out, value);
  }
  return new Uint8Array(out);
}

function writeInteger(out: number[], flags: number, prefix: number, value: number) {
  const max = (1 << prefix) - 1;
  if (value < max) {
    out.push(flags | value);
    return;
  }
  out.push(flags | max);
  value -= max;
  while (value >= 0x80) {
    out.push((value % 0x80) | 0x80);
    value = Math.floor(value / 0x80);
  }
  out.push(value);
}

function writeString(out: number[], text: string) {
  const bytes = encoder.encode(text);
  writeInteger(out, 0x00, 7, bytes.length);
  for (const byte of bytes) out.push(byte);
}
