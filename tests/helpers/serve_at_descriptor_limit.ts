/**
 * A child process for tests/admin/accept_errors_test.ts: serves "ok" through the admin
 * endpoint's connections (lib/admin/connections.ts) on 127.0.0.1, its log on standard error, and
 * on standard input takes `fill` (open /dev/null until the process has no descriptor left, so
 * that accepting fails with EMFILE for real) and `free` (close them again). Says `port N`, `full`
 * and `free` on standard output.
 */
import { CONNECTION_LIMITS, serveConnections } from "../../lib/admin/connections.ts";
import { createLogger } from "../../lib/util/log.ts";
import { realTimers } from "../../lib/util/timers.ts";

const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
serveConnections({
  listener,
  fetch: () => Promise.resolve(new Response("ok")),
  limits: CONNECTION_LIMITS,
  timers: realTimers,
  log: createLogger({ minLevel: "debug" }),
});
console.log(`port ${(listener.addr as Deno.NetAddr).port}`);

const held: Deno.FsFile[] = [];
let rest = "";
for await (const chunk of Deno.stdin.readable.pipeThrough(new TextDecoderStream())) {
  const lines = (rest + chunk).split("\n");
  rest = lines.pop()!;
  for (const line of lines) {
    if (line === "fill") {
      for (;;) {
        try {
          held.push(Deno.openSync("/dev/null"));
        } catch (e) {
          if ((e as { code?: string }).code !== "EMFILE") throw e;
          break;
        }
      }
      console.log("full");
    } else if (line === "free") {
      for (const file of held.splice(0)) file.close();
      console.log("free");
    }
  }
}
Deno.exit(0);
