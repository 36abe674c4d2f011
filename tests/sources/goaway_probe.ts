/**
 * Run as its own process by grpc_unary_test.ts: the CRI client against a runtime that restarts
 * after every few calls, closing its connections with a GOAWAY as a graceful stop does, many
 * times over. Prints "survived N" and exits 0; a transport that cannot take a GOAWAY kills the
 * process instead (Deno's node:http2 did, with an nghttp2 assertion or a segfault:
 * denoland/deno#36788).
 */
import { CriSimServer } from "../../lib/sim/cri_server.ts";
import { connectRuntime } from "../../lib/sources/cri.ts";

const [dir, cycles] = Deno.args;
const socketPath = `${dir}/runtime.sock`;
const client = connectRuntime(socketPath, 5_000);
for (let cycle = 0; cycle < Number(cycles); cycle++) {
  const runtime = await CriSimServer.start({ socketPath });
  for (let call = 0; call <= cycle % 5; call++) {
    const result = await client.listRunningPods();
    if (!result.ok) throw new Error(`cycle ${cycle}: ${result.failure.message}`);
  }
  await runtime.close();
}
client.close();
console.log(`survived ${cycles}`);
