/**
 * Run as its own process by tests/direct_http_test.ts, with proxy variables in its environment:
 * `threads` JS threads of this one process (workers, as the test runner's) build direct HTTP
 * clients at the same time, each asking a unix socket once through every client it builds, at
 * `origin`. Prints how many requests missed the socket.
 */
import { createDirectHttpClient } from "../../lib/util/direct_http.ts";

interface Job {
  path: string;
  origin: string;
  count: number;
}

async function askThroughNewClients({ path, origin, count }: Job): Promise<number> {
  let missed = 0;
  for (let i = 0; i < count; i++) {
    const client = createDirectHttpClient({ proxy: { transport: "unix", path } });
    try {
      const response = await fetch(`${origin}/`, { client, signal: AbortSignal.timeout(5_000) });
      await response.body?.cancel();
    } catch {
      missed++;
    } finally {
      client.close();
    }
  }
  return missed;
}

const WORKER = "?worker";

/** What this module sees of its scope when it runs as a worker. */
interface WorkerScope {
  onmessage: (event: MessageEvent<Job>) => void;
  postMessage(message: number): void;
  close(): void;
}

function onWorker(job: Job): Promise<number> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(`${import.meta.url}${WORKER}`, { type: "module" });
    worker.onmessage = (event: MessageEvent<number>) => resolve(event.data);
    worker.onerror = (event) => reject(new Error(event.message));
    worker.postMessage(job);
  });
}

if (import.meta.url.endsWith(WORKER)) {
  const scope = globalThis as unknown as WorkerScope;
  scope.onmessage = async (event) => {
    scope.postMessage(await askThroughNewClients(event.data));
    scope.close();
  };
} else {
  const [path, origin, threads, count] = Deno.args;
  const server = Deno.serve({ path, onListen() {} }, () => new Response("ok"));
  const job: Job = { path, origin, count: Number(count) };
  const missed = Number(threads) === 0
    ? [await askThroughNewClients(job)]
    : await Promise.all(Array.from({ length: Number(threads) }, () => onWorker(job)));
  await server.shutdown();
  console.log(JSON.stringify({ missed: missed.reduce((a, b) => a + b, 0) }));
}
