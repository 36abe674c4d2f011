/**
 * Go-style durations (`90s`, `1m30s`, `500ms`, `1.5s`, `0`), as the original checkpointer's
 * flags took them, so existing unit files keep working. Parsed exactly in nanoseconds, handed
 * out in milliseconds.
 */

const UNIT_NANOS: Record<string, bigint> = {
  ns: 1n,
  us: 1_000n,
  "\u00b5s": 1_000n, // µ, MICRO SIGN
  "\u03bcs": 1_000n, // μ, GREEK SMALL LETTER MU
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60_000_000_000n,
  h: 3_600_000_000_000n,
};

/** Go's time.Duration is an int64 of nanoseconds; longer texts are out of range there too. */
const MAX_NANOS = 2n ** 63n - 1n;

const COMPONENT = /^(\d*)(?:\.(\d*))?(ns|us|\u00b5s|\u03bcs|ms|s|m|h)/;

function parseNanos(text: string): bigint | undefined {
  let rest = text;
  let sign = 1n;
  if (rest.startsWith("-") || rest.startsWith("+")) {
    if (rest[0] === "-") sign = -1n;
    rest = rest.slice(1);
  }
  if (rest === "0") return 0n;
  if (rest === "") return undefined;
  let total = 0n;
  while (rest !== "") {
    const m = COMPONENT.exec(rest);
    if (!m) return undefined;
    const [whole, int, frac = "", unit] = m;
    if (int === "" && frac === "") return undefined;
    const scale = UNIT_NANOS[unit];
    total += BigInt(int || "0") * scale;
    if (frac !== "") total += BigInt(frac) * scale / 10n ** BigInt(frac.length);
    if (total > MAX_NANOS) return undefined;
    rest = rest.slice(whole.length);
  }
  return sign * total;
}

/** Milliseconds (fractional below 1 ms), or undefined when the text is not a Go duration. */
export function parseDuration(text: string): number | undefined {
  const nanos = parseNanos(text);
  return nanos === undefined ? undefined : Number(nanos) / 1e6;
}

/** A count of 10^-fractionDigits units as `int[.frac]`, without trailing zeros. */
function withFraction(value: bigint, fractionDigits: number): string {
  const scale = 10n ** BigInt(fractionDigits);
  const int = value / scale;
  const frac = (value % scale).toString().padStart(fractionDigits, "0").replace(/0+$/, "");
  return frac === "" ? `${int}` : `${int}.${frac}`;
}

/** Go's time.Duration.String: `0s`, `1.5ms`, `2m0s`, `1h0m0s`. */
export function formatDuration(ms: number): string {
  const nanos = BigInt(Math.round(ms * 1e6));
  if (nanos === 0n) return "0s";
  const sign = nanos < 0n ? "-" : "";
  const n = nanos < 0n ? -nanos : nanos;
  if (n < 1_000n) return `${sign}${n}ns`;
  if (n < 1_000_000n) return `${sign}${withFraction(n, 3)}\u00b5s`;
  if (n < 1_000_000_000n) return `${sign}${withFraction(n, 6)}ms`;
  const hours = n / UNIT_NANOS.h;
  const minutes = (n % UNIT_NANOS.h) / UNIT_NANOS.m;
  const seconds = `${withFraction(n % UNIT_NANOS.m, 9)}s`;
  if (hours > 0n) return `${sign}${hours}h${minutes}m${seconds}`;
  if (minutes > 0n) return `${sign}${minutes}m${seconds}`;
  return `${sign}${seconds}`;
}
