/**
 * Structured logging: one JSON object per line on standard error (journald keeps it as is).
 * Every line has time, level and msg; the rest are fields named by the caller.
 */

export type Level = "debug" | "info" | "warn" | "error";

export type Fields = Record<string, unknown>;

export interface Logger {
  debug(msg: string, fields?: Fields): void;
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
}

const ORDER: Record<Level, number> = { debug: 0, info: 1, warn: 2, error: 3 };

function serialize(value: unknown): unknown {
  if (typeof value === "bigint") return value.toString();
  if (value instanceof Error) return value.message;
  return value;
}

export function createLogger(
  opts: { minLevel?: Level; write?: (line: string) => void; now?: () => Date } = {},
): Logger {
  const min = ORDER[opts.minLevel ?? "info"];
  const encoder = new TextEncoder();
  const write = opts.write ??
    ((line: string) => Deno.stderr.writeSync(encoder.encode(line + "\n")));
  const now = opts.now ?? (() => new Date());
  const log = (level: Level) => (msg: string, fields: Fields = {}) => {
    if (ORDER[level] < min) return;
    write(
      JSON.stringify({ time: now().toISOString(), level, msg, ...fields }, (_k, v) => serialize(v)),
    );
  };
  return { debug: log("debug"), info: log("info"), warn: log("warn"), error: log("error") };
}

/** For commands whose output is the point (plan, verify): nothing goes to standard error. */
export const silentLogger: Logger = createLogger({ minLevel: "error", write: () => {} });
