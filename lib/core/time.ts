/**
 * Instants and durations in nanoseconds (bigint). Snapshots are public documents whose
 * timestamps may carry nanoseconds, as Go writes them; keeping that precision means a grace
 * deadline computed here equals the one the reference implementation computes.
 */

export type Instant = bigint;
export type Duration = bigint;

export const NANOS_PER_MILLI = 1_000_000n;
export const NANOS_PER_SECOND = 1_000_000_000n;

const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

function daysInMonth(year: number, month: number): number {
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  return [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1];
}

function utcMillis(y: number, mo: number, d: number, h: number, mi: number, s: number): number {
  const date = new Date(0);
  // setUTCFullYear, unlike Date.UTC, does not map years 0–99 onto 1900–1999.
  date.setUTCFullYear(y, mo - 1, d);
  date.setUTCHours(h, mi, s, 0);
  return date.getTime();
}

/** Parses an RFC 3339 timestamp; returns undefined when the text is not one. */
export function parseInstant(text: string): Instant | undefined {
  const m = RFC3339.exec(text);
  if (!m) return undefined;
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number);
  if (mo < 1 || mo > 12 || d < 1 || d > daysInMonth(y, mo)) return undefined;
  if (h > 23 || mi > 59 || s > 59) return undefined;
  let offsetMinutes = 0;
  if (!m[8]) {
    const oh = Number(m[10]), om = Number(m[11]);
    if (oh > 23 || om > 59) return undefined;
    offsetMinutes = (m[9] === "-" ? -1 : 1) * (oh * 60 + om);
  }
  const fraction = BigInt((m[7] ?? "").padEnd(9, "0"));
  const millis = utcMillis(y, mo, d, h, mi, s) - offsetMinutes * 60_000;
  return BigInt(millis) * NANOS_PER_MILLI + fraction;
}

/** Formats as RFC 3339 in UTC, with the shortest exact fraction (none for whole seconds). */
export function formatInstant(t: Instant): string {
  const seconds = t >= 0n
    ? t / NANOS_PER_SECOND
    : -((-t + NANOS_PER_SECOND - 1n) / NANOS_PER_SECOND);
  const nanos = t - seconds * NANOS_PER_SECOND;
  // Beyond year 9999 (no RFC 3339 form), toISOString gives an extended year: keep it whole.
  const base = new Date(Number(seconds) * 1000).toISOString().replace(/\.\d{3}Z$/, "");
  const fraction = nanos === 0n ? "" : "." + nanos.toString().padStart(9, "0").replace(/0+$/, "");
  return `${base}${fraction}Z`;
}

/** The last instant RFC 3339 can write: a deadline must not fall after it. */
export const LAST_INSTANT: Instant = parseInstant("9999-12-31T23:59:59.999999999Z")!;

export function instantFromDate(date: Date): Instant {
  return BigInt(date.getTime()) * NANOS_PER_MILLI;
}

export function instantToDate(t: Instant): Date {
  return new Date(Number(t / NANOS_PER_MILLI));
}

export function secondsToDuration(seconds: number): Duration {
  return BigInt(Math.round(seconds * 1e9));
}

/** Milliseconds, as the configuration keeps durations, rounded to a whole one. */
export function millisToDuration(ms: number): Duration {
  return BigInt(Math.round(ms)) * NANOS_PER_MILLI;
}

/** A clock the core never reads by itself: callers inject it, tests fix it. */
export interface Clock {
  now(): Instant;
}

export const systemClock: Clock = { now: () => instantFromDate(new Date()) };
