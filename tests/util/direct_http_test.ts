/**
 * Direct HTTP clients (lib/util/direct_http.ts) reach their unix socket whatever the proxy variables
 * say: the variables are hidden while a client is built, and the origin is one no NO_PROXY
 * lists, also when several JS threads of one process build clients at once.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { join } from "node:path";
import { UNIX_SOCKET_ORIGIN } from "../../lib/util/direct_http.ts";
import { withTempDir } from "../helpers/temp_dir.ts";

const PROBE = new URL("../helpers/direct_http_probe.ts", import.meta.url).pathname;

async function missed(env: Record<string, string>, origin: string, threads: number, count: number) {
  return await withTempDir(async (dir) => {
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--allow-all",
        "--quiet",
        PROBE,
        join(dir, "s.sock"),
        origin,
        `${threads}`,
        `${count}`,
      ],
      env,
      stdout: "piped",
      stderr: "piped",
    }).output();
    assertEquals(out.code, 0, new TextDecoder().decode(out.stderr));
    return JSON.parse(new TextDecoder().decode(out.stdout)).missed;
  });
}

const DEAD = "http://127.0.0.1:9";

Deno.test("a direct client reaches its socket even at localhost with NO_PROXY covering every host", async () => {
  // Only the hiding of the variables can save these requests: every name and address is listed.
  const env = { NO_PROXY: "*,0.0.0.0/0,::/0", no_proxy: "*", HTTP_PROXY: DEAD, ALL_PROXY: DEAD };
  assertEquals(await missed(env, "http://localhost", 0, 20), 0);
  assertEquals(await missed(env, UNIX_SOCKET_ORIGIN, 0, 20), 0);
});

Deno.test("direct clients built by four threads at once all reach the socket, with NO_PROXY=*", async () => {
  const env = { NO_PROXY: "*", no_proxy: "127.0.0.1,localhost", HTTP_PROXY: DEAD };
  assertEquals(await missed(env, UNIX_SOCKET_ORIGIN, 4, 300), 0);
});
