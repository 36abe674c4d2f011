/** Every line a logger writes, kept parsed, debug included. */
import { createLogger, type Logger } from "../../lib/util/log.ts";

export interface LogLine {
  level: string;
  msg: string;
  [field: string]: unknown;
}

export class LogCapture {
  readonly lines: LogLine[] = [];
  readonly logger: Logger = createLogger({
    minLevel: "debug",
    write: (line) => this.lines.push(JSON.parse(line)),
  });
  find(msg: string): LogLine[] {
    return this.lines.filter((l) => l.msg === msg);
  }
}
