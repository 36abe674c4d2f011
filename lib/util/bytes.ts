/** Reading byte streams whole, with a bound where the sender is not trusted; comparing bytes. */
import { Buffer } from "node:buffer";

/**
 * Whether the two hold the same bytes. node:buffer compares natively: 6 MB in about 0.1 ms,
 * where a loop in JavaScript takes 3 ms (a kubelet's /pods at 1,000 parents, every poll).
 */
export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  return Buffer.from(a.buffer, a.byteOffset, a.length)
    .equals(Buffer.from(b.buffer, b.byteOffset, b.length));
}

/** The chunks as one array. */
export function concatBytes(chunks: readonly Uint8Array[]): Uint8Array<ArrayBuffer> {
  const all = new Uint8Array(chunks.reduce((size, chunk) => size + chunk.length, 0));
  let offset = 0;
  for (const chunk of chunks) {
    all.set(chunk, offset);
    offset += chunk.length;
  }
  return all;
}

/**
 * The whole stream, or undefined as soon as it grows past `limit` bytes (the stream is then
 * cancelled): at most `limit` bytes and one chunk are ever held.
 */
export async function readBounded(
  stream: ReadableStream<Uint8Array>,
  limit: number,
): Promise<Uint8Array<ArrayBuffer> | undefined> {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      return undefined;
    }
    chunks.push(value);
  }
  return concatBytes(chunks);
}
