/**
 * No request body to the admin endpoint may exceed MAX_BODY_BYTES. The declared Content-Length
 * is checked first (refused without reading a byte), then the bytes actually received are
 * counted, so a chunked body cannot slip past; at most MAX_BODY_BYTES + one chunk is held.
 */
import type { Context, MiddlewareHandler } from "hono";

export const MAX_BODY_BYTES = 64 * 1024;

/** A body of at most `limit` bytes, or undefined when it is longer. */
async function readBounded(
  body: ReadableStream<Uint8Array>,
  limit: number,
): Promise<Uint8Array<ArrayBuffer> | undefined> {
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > limit) {
      await reader.cancel();
      return undefined;
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.length;
  }
  return bytes;
}

/** Reads the whole body up front; handlers get it back as an ordinary, already-checked body. */
export function limitBody(
  limit: number,
  tooLarge: (c: Context) => Response,
): MiddlewareHandler {
  return async (c, next) => {
    const request = c.req.raw;
    if (!request.body) return await next();
    const declared = request.headers.get("content-length");
    if (declared !== null && Number(declared) > limit) return tooLarge(c);
    const body = await readBounded(request.body, limit);
    if (body === undefined) return tooLarge(c);
    // Not `new Request(request, …)`: that would tie the copy to the request's abort signal,
    // which Deno.serve aborts when the response is sent.
    c.req.raw = new Request(request.url, {
      method: request.method,
      headers: request.headers,
      body,
    });
    return await next();
  };
}
