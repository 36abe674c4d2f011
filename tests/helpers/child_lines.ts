/** What a child process writes on a stream, one line at a time as it comes (its JSON log lines
 *  parsed), drained to the end so that the child never blocks on a full pipe. */
import type { LogLine } from "./log_capture.ts";

export class ChildLines {
  readonly lines: string[] = [];
  /** Resolves once the stream has ended. */
  readonly ended: Promise<void>;

  constructor(stream: ReadableStream<Uint8Array>) {
    this.ended = (async () => {
      let rest = "";
      for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
        const lines = (rest + chunk).split("\n");
        rest = lines.pop()!;
        this.lines.push(...lines);
      }
      if (rest !== "") this.lines.push(rest);
    })();
  }

  /** The log lines with this message; a line that is not JSON is none. */
  find(msg: string): LogLine[] {
    return this.lines.flatMap((line) => {
      try {
        const parsed = JSON.parse(line) as LogLine;
        return parsed.msg === msg ? [parsed] : [];
      } catch {
        return [];
      }
    });
  }
}
