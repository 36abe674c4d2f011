/**
 * Structured logging on standard error, one line per record: time, level, message and the
 * fields named by the caller, as `text` (key=value) or as a JSON object.
 *
 * Under systemd (stderr is the journal's stream) each line starts with its syslog priority,
 * `<3>` error, `<4>` warn, `<6>` info, `<7>` debug (sd-daemon(3)): journald strips it and keeps
 * the line at that priority, so `journalctl -p warning` filters. The prefix, rather than writing
 * to the journal's native socket: it needs nothing but the stream systemd already gives the
 * service (SyslogLevelPrefix= defaults to yes, and systemd/ckpt-agent.service keeps it), cannot
 * lose a line that the stream would have kept, and reads the same when stderr is redirected.
 */
/** From the most to the least said. */
export const LEVELS = ["debug", "info", "warn", "error"] as const;

export type Level = typeof LEVELS[number];

/** How a line is written; `auto`: see stderrLogger. */
export const LOG_FORMATS = ["auto", "text", "json"] as const;

export type LogFormat = typeof LOG_FORMATS[number];

export type Fields = Record<string, unknown>;

export interface Logger {
  debug(msg: string, fields?: Fields): void;
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
}

/** The syslog priority of each level, as journald reads it at the start of a line. */
const PRIORITIES: Record<Level, number> = { error: 3, warn: 4, info: 6, debug: 7 };

function serialize(value: unknown): unknown {
  if (typeof value === "bigint") return value.toString();
  if (value instanceof Error) return value.message;
  return value;
}

/**
 * A value as text writes it: bare when it holds no space, quote, `=`, backslash or control
 * character (and is not empty), else as a JSON string; numbers, booleans and null as JSON, lists
 * and objects as their JSON text, quoted by the same rule. U+2028 and U+2029, which JSON leaves
 * as they are and some viewers break lines at, are escaped too: a record is always one line.
 */
export function textValue(value: unknown): string {
  const v = serialize(value);
  if (v === undefined) return "null";
  const s = typeof v === "string"
    ? v
    : JSON.stringify(v, (_k, inner) => serialize(inner)) ?? String(v);
  if (typeof v !== "string" && typeof v !== "object") return s;
  if (/^[^\s"=\\\p{Cc}\u2028\u2029]+$/u.test(s)) return s;
  return JSON.stringify(s).replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029");
}

/** A message as text writes it: as given, with control characters escaped as JSON escapes them. */
function textMessage(msg: string): string {
  return /[\p{Cc}\u2028\u2029]/u.test(msg) ? textValue(msg).slice(1, -1) : msg;
}

/** A field name as text writes it: what would end the key or the line becomes `_`. */
function textKey(key: string): string {
  return key.replace(/[^\p{L}\p{N}_.:/-]/gu, "_") || "_";
}

export interface LoggerOptions {
  minLevel?: Level;
  /** `json` (the default) or `text`. */
  format?: Exclude<LogFormat, "auto">;
  /** Each line starts with its syslog priority, for the journal. */
  priorities?: boolean;
  /** Whether a text line starts with its time: not in the journal, which stamps every line. */
  time?: boolean;
  write?: (line: string) => void;
  now?: () => Date;
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  const min = LEVELS.indexOf(opts.minLevel ?? "info");
  const encoder = new TextEncoder();
  const write = opts.write ??
    ((line: string) => Deno.stderr.writeSync(encoder.encode(line + "\n")));
  const now = opts.now ?? (() => new Date());
  const format = opts.format ?? "json";
  const time = opts.time ?? true;
  const line = (level: Level, msg: string, fields: Fields): string => {
    if (format === "json") {
      return JSON.stringify(
        { time: now().toISOString(), level, msg, ...fields },
        (_k, v) => serialize(v),
      );
    }
    const parts = time ? [now().toISOString()] : [];
    parts.push(level.toUpperCase().padEnd(5), textMessage(msg));
    for (const [key, value] of Object.entries(fields)) {
      if (value !== undefined) parts.push(`${textKey(key)}=${textValue(value)}`);
    }
    return parts.join(" ");
  };
  const log = (level: Level) => (msg: string, fields: Fields = {}) => {
    if (LEVELS.indexOf(level) < min) return;
    const prefix = opts.priorities ? `<${PRIORITIES[level]}>` : "";
    write(prefix + line(level, msg, fields));
  };
  return { debug: log("debug"), info: log("info"), warn: log("warn"), error: log("error") };
}

/**
 * Whether standard error is the journal's stream: systemd names the stream it connects a
 * service's stderr to in JOURNAL_STREAM (`device:inode`); a process whose stderr was redirected
 * since (a shell, `2>file`) inherits the variable but not the stream.
 */
export async function stderrIsJournal(
  journalStream = Deno.env.get("JOURNAL_STREAM"),
): Promise<boolean> {
  const match = /^(\d+):(\d+)$/.exec(journalStream ?? "");
  if (!match) return false;
  try {
    // Deno has no fstat of a descriptor, and lets a process read /proc/self/fd only with every
    // permission, which the binary does not have: node:fs's fstat, which needs none. Imported
    // only here, when there is a stream to compare: imported by every command, it changed how a
    // process fares out of descriptors (tests/admin/accept_errors_test.ts).
    const { fstatSync } = await import("node:fs");
    const stat = fstatSync(2);
    return stat.dev === Number(match[1]) && stat.ino === Number(match[2]);
  } catch {
    return false;
  }
}

/**
 * The logger of a command, on standard error, as the settings say. `auto` writes text on a
 * terminal and in the journal: journalctl shows a line as it is, where key=value reads at a
 * glance and JSON's quotes and braces do not, and text there leaves the time out, since the
 * journal stamps every line itself; JSON elsewhere (a file, a pipe), for whatever reads it.
 */
export async function stderrLogger(
  settings: { logLevel: Level; logFormat: LogFormat },
): Promise<Logger> {
  const journal = await stderrIsJournal();
  const format = settings.logFormat !== "auto"
    ? settings.logFormat
    : journal || Deno.stderr.isTerminal()
    ? "text"
    : "json";
  return createLogger({ minLevel: settings.logLevel, format, priorities: journal, time: !journal });
}

/** For commands whose output is the point (plan, verify): nothing goes to standard error. */
export const silentLogger: Logger = createLogger({ minLevel: "error", write: () => {} });
