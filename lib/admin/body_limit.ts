/**
 * No request body to the admin endpoint may exceed MAX_BODY_BYTES. The declared Content-Length
 * is checked first (refused without reading a byte), then the bytes actually received are
 * counted, so a chunked body cannot slip past; at most MAX_BODY_BYTES + one chunk is held.
 */
import type { Context, MiddlewareHandler } from "hono";
import { readBounded } from "../util/bytes.ts";

export const MAX_BODY_BYTES = 64 * 1024;

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
