/**
 * A small parser of the Prometheus text exposition format (version 0.0.4), strict enough to
 * reject what a real scraper would: every sample must belong to a family with a TYPE line, label
 * values must be properly quoted and escaped, values must be numbers.
 */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: string;
  help: string;
  samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const SUFFIXES: Record<string, string[]> = {
  counter: [""],
  gauge: [""],
  histogram: ["_bucket", "_sum", "_count"],
  summary: ["", "_sum", "_count"],
  untyped: [""],
};

function parseValue(text: string): number {
  if (text === "+Inf") return Infinity;
  if (text === "-Inf") return -Infinity;
  if (text === "NaN") return NaN;
  const value = Number(text);
  if (text === "" || Number.isNaN(value)) throw new Error(`not a sample value: ${text}`);
  return value;
}

function parseLabels(text: string, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  let i = 0;
  while (i < text.length) {
    const eq = text.indexOf("=", i);
    const name = text.slice(i, eq);
    if (!LABEL_NAME.test(name) || text[eq + 1] !== '"') throw new Error(`bad labels: ${line}`);
    let value = "";
    let j = eq + 2;
    for (; j < text.length && text[j] !== '"'; j++) {
      if (text[j] === "\\") {
        const next = text[++j];
        value += next === "n" ? "\n" : next;
        if (next !== "n" && next !== "\\" && next !== '"') throw new Error(`bad escape: ${line}`);
      } else value += text[j];
    }
    if (j >= text.length) throw new Error(`unterminated label value: ${line}`);
    if (name in labels) throw new Error(`repeated label ${name}: ${line}`);
    labels[name] = value;
    i = j + 1;
    if (text[i] === ",") i++;
    else if (i < text.length) throw new Error(`bad labels: ${line}`);
  }
  return labels;
}

export function parsePrometheusText(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const help = new Map<string, string>();
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    const comment = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
    if (comment) {
      const [, kind, name, rest] = comment;
      if (!NAME.test(name)) throw new Error(`bad metric name: ${line}`);
      if (kind === "HELP") help.set(name, rest);
      else {
        if (!(rest in SUFFIXES)) throw new Error(`unknown type: ${line}`);
        if (families.has(name)) throw new Error(`second TYPE for ${name}`);
        families.set(name, { name, type: rest, help: help.get(name) ?? "", samples: [] });
      }
      continue;
    }
    if (line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)( -?\d+)?$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const [, name, labelText, value] = m;
    const family = [...families.values()].find((f) =>
      SUFFIXES[f.type].some((suffix) => name === f.name + suffix)
    );
    if (!family) throw new Error(`sample without a TYPE: ${line}`);
    family.samples.push({
      name,
      labels: parseLabels(labelText ?? "", line),
      value: parseValue(value),
    });
  }
  return families;
}

/** The value of the one sample of `family` whose labels are exactly `labels`. */
export function sampleValue(
  families: Map<string, Family>,
  name: string,
  labels: Record<string, string> = {},
  sampleName = name,
): number | undefined {
  const family = families.get(name);
  const wanted = JSON.stringify(Object.entries(labels).sort());
  const found = family?.samples.filter((s) =>
    s.name === sampleName && JSON.stringify(Object.entries(s.labels).sort()) === wanted
  );
  if (found && found.length > 1) throw new Error(`${name}${wanted}: ${found.length} samples`);
  return found?.[0]?.value;
}

/** What `promtool check metrics` (Debian's prometheus package) says of an exposition. */
export async function promtoolCheckMetrics(text: string): Promise<{ code: number; said: string }> {
  const child = new Deno.Command("promtool", {
    args: ["check", "metrics"],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(text));
  await writer.close();
  const out = await child.output();
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  return { code: out.code, said: decode(out.stdout) + decode(out.stderr) };
}
