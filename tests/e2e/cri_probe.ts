/**
 * Run as its own process, with a proxy environment, by proxy_env_test.ts: the agent's CRI client
 * asks the runtime at the endpoint given, and so does a Deno HttpClient built the plain way, for
 * comparison. Prints {"listed": <the client's result>, "plain": "answered" | <error>}.
 */
import { connectRuntime, runtimeSocketPath } from "../../lib/sources/cri.ts";

const [endpoint] = Deno.args;
const runtime = connectRuntime(endpoint, 5_000);
const listed = await runtime.listRunningPods();
runtime.close();

const plainClient = Deno.createHttpClient({
  proxy: { transport: "unix", path: runtimeSocketPath(endpoint)! },
  http1: false,
  http2: true,
});
let plain: string;
try {
  const response = await fetch("http://localhost/runtime.v1.RuntimeService/Version", {
    method: "POST",
    client: plainClient,
    headers: { "content-type": "application/grpc+proto", te: "trailers" },
    body: new Uint8Array(5),
  });
  await response.body?.cancel();
  plain = "answered";
} catch (e) {
  plain = String((e as Error).cause ?? e);
} finally {
  plainClient.close();
}
console.log(JSON.stringify({ listed, plain }));
