/**
 * Structured logging: one JSON object per line on standard error (journald keeps it as is).
 * Every line has time, level and msg; the rest are fields named by the caller.
 */

/** From the most to the least said. */
export const LEVELS = ["debug", "info", "warn", "error"] as const;

export type Level = typeof LEVELS[number];

export type Fields = Record<string, unknown>;

export interface Logger {
  debug(msg: string, fields?: Fields): void;
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
}

function serialize(value: unknown): unknown {
  if (typeof value === "bigint") return value.toString();
  if (value instanceof Error) return value.message;
  return value;
}

export function createLogger(
  opts: { minLevel?: Level; write?: (line: string) => void; now?: () => Date } = {},
): Logger {
  const min = LEVELS.indexOf(opts.minLevel ?? "info");
  const encoder = new TextEncoder();
  const write = opts.write ??
    ((line: string) => Deno.stderr.writeSync(encoder.encode(line + "\n")));
  const now = opts.now ?? (() => new Date());
  const log = (level: Level) => (msg: string, fields: Fields = {}) => {
    if (LEVELS.indexOf(level) < min) return;
    write(
      JSON.stringify({ time: now().toISOString(), level, msg, ...fields }, (_k, v) => serialize(v)),
    );
  };
  return { debug: log("debug"), info: log("info"), warn: log("warn"), error: log("error") };
}

/** For commands whose output is the point (plan, verify): nothing goes to standard error. */
export const silentLogger: Logger = createLogger({ minLevel: "error", write: () => {} });
