/** Waiting for an agent started as a process to serve its admin endpoint. */
import { UNIX_SOCKET_ORIGIN } from "../../lib/util/direct_http.ts";

/** The first 200 on `path` (at `origin`: the socket's, by default); bounded: the daemon starts
 *  in well under a second, 300 tries. */
export async function untilAnswers(
  client: Deno.HttpClient,
  path: string,
  origin = UNIX_SOCKET_ORIGIN,
): Promise<Response> {
  let last: unknown;
  for (let attempt = 0; attempt < 300; attempt++) {
    try {
      const response = await fetch(`${origin}${path}`, { client });
      if (response.status === 200) return response;
      await response.body?.cancel();
    } catch (e) {
      last = e;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`the admin endpoint never answered 200 on ${path}: ${last}`);
}
