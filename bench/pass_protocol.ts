/**
 * How bench/pass_bench.ts drives bench/pass_agent.ts: one JSON object per line, a request on the
 * agent's stdin, its answer on stdout. The agent runs in a process of its own so that the
 * simulated servers (in the bench's process) do not share its JavaScript thread, as on a node.
 */

export type AgentRequest =
  /** One pass with the agent's stores. */
  | { cmd: "pass" }
  /** Opens a path that does not exist, so that a system-call trace shows where this point is. */
  | { cmd: "mark"; path: string };

/** Milliseconds are counted from the moment the agent process calls `Agent.pass`. */
export interface PassTiming {
  wallMs: number;
  /** CPU time (user + system, every thread) the agent process used during the pass. */
  cpuMs: number;
  /** The agent process's memory right after the pass (bytes). */
  memory: { rss: number; heapTotal: number; heapUsed: number; external: number };
  /** Until the observation (every source and both manifest dirs) is complete. */
  observedMs: number;
  /** Until each source's list came back (failures included). */
  answeredMs: { apiserver: number; kubelet: number; runtime: number };
  complete: boolean;
  errors: string[];
  bytesWritten: number;
  /** Applied actions by kind, e.g. `{ checkpoint: 100, files: 100 }`. */
  applied: Record<string, number>;
  /** When each active manifest was durable (fsynced, renamed, directory fsynced), in order. */
  startsDurableMs: number[];
}

export type AgentAnswer = { ok: true; timing?: PassTiming } | { ok: false; error: string };

/** The lines of a byte stream, without their line ends. */
export async function* lines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  let buffered = "";
  for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
    buffered += chunk;
    let end: number;
    while ((end = buffered.indexOf("\n")) >= 0) {
      yield buffered.slice(0, end);
      buffered = buffered.slice(end + 1);
    }
  }
  if (buffered !== "") yield buffered;
}
