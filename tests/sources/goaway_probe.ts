/**
 * Run as its own process by grpc_unary_test.ts: the CRI client against a runtime that drops its
 * connections with a GOAWAY after a few calls, as a restarting runtime does, many times over.
 * Prints "survived N" and exits 0; a transport that cannot take a GOAWAY kills the process
 * instead (with Deno's node:http2, an nghttp2 assertion or a segfault: denoland/deno#36788).
 */
import { connectRuntime } from "../../lib/sources/cri.ts";
import { answerOk, startH2cServer } from "../../lib/sim/h2c_server.ts";

const [dir, cycles] = Deno.args;
// Every RuntimeService answer decodes from an empty message: a version, or empty lists.
const server = await startH2cServer(`${dir}/runtime.sock`, (stream) => {
  answerOk(stream, new Uint8Array());
});
const client = connectRuntime(server.socketPath, 5_000);
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
for (let cycle = 0; cycle < Number(cycles); cycle++) {
  for (let call = 0; call <= cycle % 5; call++) {
    const result = await client.listRunningPods();
    if (!result.ok) throw new Error(`cycle ${cycle}: ${result.failure.message}`);
  }
  await pause(cycle % 3);
  server.dropSessions();
  await pause(2);
}
client.close();
await server.close();
console.log(`survived ${cycles}`);
