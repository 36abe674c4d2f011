/**
 * Counters, gauges and a histogram in Prometheus's text exposition format (version 0.0.4): the
 * little of prom-client the admin endpoint used, written here because prom-client (CommonJS,
 * with its dependencies) was a tenth of the daemon's memory for seventeen metric families.
 *
 * Families are written in the order they were made; a family with labels shows one sample per
 * label set it was given, and only its HELP and TYPE lines before the first.
 */

export type Labels = Record<string, string>;

/** `\` and newline escaped in HELP text; also `"` in label values. */
function escape(text: string, quote: boolean): string {
  const escaped = text.replaceAll("\\", "\\\\").replaceAll("\n", "\\n");
  return quote ? escaped.replaceAll('"', '\\"') : escaped;
}

function formatValue(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  return String(value);
}

function formatLabels(labels: Labels): string {
  const pairs = Object.entries(labels).map(([k, v]) => `${k}="${escape(v, true)}"`);
  return pairs.length === 0 ? "" : `{${pairs.join(",")}}`;
}

/** A label set as a map key: its values in the family's label order. */
function keyOf(labelNames: readonly string[], labels: Labels): string {
  return JSON.stringify(labelNames.map((name) => labels[name] ?? ""));
}

abstract class Family {
  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: "counter" | "gauge" | "histogram",
  ) {}

  abstract samples(): string[];

  text(): string {
    return [
      `# HELP ${this.name} ${escape(this.help, false)}`,
      `# TYPE ${this.name} ${this.type}`,
      ...this.samples(),
    ].join("\n");
  }
}

/** A value per label set (one, without labels, that starts at 0). */
class Values extends Family {
  readonly #labelNames: readonly string[];
  #values = new Map<string, { labels: Labels; value: number }>();

  constructor(
    name: string,
    help: string,
    type: "counter" | "gauge",
    labelNames: readonly string[],
  ) {
    super(name, help, type);
    this.#labelNames = labelNames;
    if (labelNames.length === 0) this.#values.set(keyOf([], {}), { labels: {}, value: 0 });
  }

  protected add(labels: Labels, by: number): void {
    const entry = this.#values.get(keyOf(this.#labelNames, labels));
    if (entry) entry.value += by;
    else this.#values.set(keyOf(this.#labelNames, labels), { labels: { ...labels }, value: by });
  }

  protected put(labels: Labels, value: number): void {
    this.#values.set(keyOf(this.#labelNames, labels), { labels: { ...labels }, value });
  }

  /** Forgets every label set (a family without labels goes back to 0). */
  reset(): void {
    this.#values = new Map();
    if (this.#labelNames.length === 0) this.#values.set(keyOf([], {}), { labels: {}, value: 0 });
  }

  samples(): string[] {
    return [...this.#values.values()].map(({ labels, value }) =>
      `${this.name}${formatLabels(labels)} ${formatValue(value)}`
    );
  }
}

export class Counter extends Values {
  constructor(name: string, help: string, labelNames: readonly string[] = []) {
    super(name, help, "counter", labelNames);
  }

  inc(labels: Labels = {}, by = 1): void {
    if (by < 0) throw new Error(`${this.name}: a counter only goes up`);
    this.add(labels, by);
  }
}

export class Gauge extends Values {
  /** `collect`: sets the gauge's values each time the metrics are read. */
  constructor(
    name: string,
    help: string,
    labelNames: readonly string[] = [],
    readonly collect?: (gauge: Gauge) => void,
  ) {
    super(name, help, "gauge", labelNames);
  }

  set(labels: Labels, value: number): void {
    this.put(labels, value);
  }

  override samples(): string[] {
    this.collect?.(this);
    return super.samples();
  }
}

/** Without labels: cumulative buckets by upper bound, the sum and the count. */
export class Histogram extends Family {
  readonly #bounds: readonly number[];
  readonly #counts: number[];
  #sum = 0;
  #count = 0;

  constructor(name: string, help: string, bounds: readonly number[]) {
    super(name, help, "histogram");
    this.#bounds = [...bounds].sort((a, b) => a - b);
    this.#counts = this.#bounds.map(() => 0);
  }

  observe(value: number): void {
    this.#sum += value;
    this.#count++;
    const bucket = this.#bounds.findIndex((bound) => value <= bound);
    if (bucket >= 0) this.#counts[bucket]++;
  }

  samples(): string[] {
    let cumulative = 0;
    const buckets = this.#bounds.map((bound, i) => {
      cumulative += this.#counts[i];
      return `${this.name}_bucket{le="${formatValue(bound)}"} ${cumulative}`;
    });
    return [
      ...buckets,
      `${this.name}_bucket{le="+Inf"} ${this.#count}`,
      `${this.name}_sum ${formatValue(this.#sum)}`,
      `${this.name}_count ${this.#count}`,
    ];
  }
}

/** The families of one endpoint, in the order they were registered. */
export class Exposition {
  readonly contentType = "text/plain; version=0.0.4; charset=utf-8";
  readonly #families: Family[] = [];

  register<F extends Family>(family: F): F {
    if (this.#families.some((f) => f.name === family.name)) {
      throw new Error(`${family.name}: registered twice`);
    }
    this.#families.push(family);
    return family;
  }

  text(): string {
    return this.#families.map((family) => `${family.text()}\n`).join("\n");
  }
}
