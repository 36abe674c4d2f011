/**
 * Counters, gauges and a histogram in Prometheus's text exposition format (version 0.0.4): the
 * little of prom-client the admin endpoint used, with the same shape of calls, written here
 * because prom-client (CommonJS, with its dependencies) cost the daemon megabytes of memory for
 * seventeen metric families.
 *
 * Families are written in the order they were made; a family with labels shows one sample per
 * label set it was given, and only its HELP and TYPE lines before the first.
 */

export type Labels<L extends string = string> = Partial<Record<L, string>>;

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
  const pairs = Object.entries(labels).map(([k, v]) => `${k}="${escape(v ?? "", true)}"`);
  return pairs.length === 0 ? "" : `{${pairs.join(",")}}`;
}

interface Family {
  /** HELP, TYPE and the samples, read now. */
  text(): string;
  readonly name: string;
}

/** The families of one endpoint, in the order they were made. */
export class Registry {
  readonly contentType = "text/plain; version=0.0.4; charset=utf-8";
  readonly #families: Family[] = [];

  registerMetric(family: Family): void {
    if (this.#families.some((f) => f.name === family.name)) {
      throw new Error(`${family.name}: registered twice`);
    }
    this.#families.push(family);
  }

  metrics(): Promise<string> {
    return Promise.resolve(this.#families.map((family) => `${family.text()}\n`).join("\n"));
  }
}

interface FamilyOptions<L extends string> {
  name: string;
  help: string;
  labelNames?: readonly L[];
  registers: Registry[];
}

function header(name: string, help: string, type: string): string[] {
  return [`# HELP ${name} ${escape(help, false)}`, `# TYPE ${name} ${type}`];
}

/** A value per label set (one, without labels, that starts at 0). */
class Values<L extends string> implements Family {
  readonly name: string;
  readonly #help: string;
  readonly #type: "counter" | "gauge";
  readonly #labelNames: readonly L[];
  #values = new Map<string, { labels: Labels<L>; value: number }>();

  constructor(options: FamilyOptions<L>, type: "counter" | "gauge") {
    this.name = options.name;
    this.#help = options.help;
    this.#type = type;
    this.#labelNames = options.labelNames ?? [];
    this.reset();
    for (const registry of options.registers) registry.registerMetric(this);
  }

  /** A label set as a map key: its values in the family's label order. */
  #key(labels: Labels<L>): string {
    return JSON.stringify(this.#labelNames.map((name) => labels[name] ?? ""));
  }

  protected update(labels: Labels<L>, next: (value: number) => number): void {
    const key = this.#key(labels);
    const entry = this.#values.get(key);
    this.#values.set(key, {
      labels: entry?.labels ?? { ...labels },
      value: next(entry?.value ?? 0),
    });
  }

  /** Forgets every label set (a family without labels goes back to 0). */
  reset(): void {
    this.#values = new Map();
    if (this.#labelNames.length === 0) this.#values.set(this.#key({}), { labels: {}, value: 0 });
  }

  protected samples(): string[] {
    return [...this.#values.values()].map(({ labels, value }) =>
      `${this.name}${formatLabels(labels)} ${formatValue(value)}`
    );
  }

  text(): string {
    return [...header(this.name, this.#help, this.#type), ...this.samples()].join("\n");
  }
}

/** `inc()`, `inc(by)`, `inc(labels)` or `inc(labels, by)`, as prom-client takes them. */
function labelsAndValue<L extends string>(
  a: Labels<L> | number | undefined,
  b: number | undefined,
  otherwise: number,
): [Labels<L>, number] {
  return typeof a === "number" ? [{}, a] : [a ?? {}, b ?? otherwise];
}

export class Counter<L extends string = string> extends Values<L> {
  constructor(options: FamilyOptions<L>) {
    super(options, "counter");
  }

  inc(labelsOrBy?: Labels<L> | number, by?: number): void {
    const [labels, value] = labelsAndValue(labelsOrBy, by, 1);
    if (value < 0) throw new Error(`${this.name}: a counter only goes up`);
    this.update(labels, (current) => current + value);
  }
}

export class Gauge<L extends string = string> extends Values<L> {
  readonly #collect: ((this: Gauge<L>) => void) | undefined;

  /** `collect`: sets the gauge's values each time the metrics are read. */
  constructor(options: FamilyOptions<L> & { collect?: (this: Gauge<L>) => void }) {
    super(options, "gauge");
    this.#collect = options.collect;
  }

  /** `set(value)` or `set(labels, value)`. */
  set(labelsOrValue: Labels<L> | number, value?: number): void {
    const [labels, next] = labelsAndValue(labelsOrValue, value, 0);
    this.update(labels, () => next);
  }

  protected override samples(): string[] {
    this.#collect?.call(this);
    return super.samples();
  }
}

/** Without labels: cumulative buckets by upper bound, the sum and the count. */
export class Histogram implements Family {
  readonly name: string;
  readonly #help: string;
  readonly #bounds: readonly number[];
  readonly #counts: number[];
  #sum = 0;
  #count = 0;

  constructor(options: FamilyOptions<never> & { buckets: readonly number[] }) {
    this.name = options.name;
    this.#help = options.help;
    this.#bounds = [...options.buckets].sort((a, b) => a - b);
    this.#counts = this.#bounds.map(() => 0);
    for (const registry of options.registers) registry.registerMetric(this);
  }

  observe(value: number): void {
    this.#sum += value;
    this.#count++;
    const bucket = this.#bounds.findIndex((bound) => value <= bound);
    if (bucket >= 0) this.#counts[bucket]++;
  }

  text(): string {
    let cumulative = 0;
    const buckets = this.#bounds.map((bound, i) => {
      cumulative += this.#counts[i];
      return `${this.name}_bucket{le="${formatValue(bound)}"} ${cumulative}`;
    });
    return [
      ...header(this.name, this.#help, "histogram"),
      ...buckets,
      `${this.name}_bucket{le="+Inf"} ${this.#count}`,
      `${this.name}_sum ${formatValue(this.#sum)}`,
      `${this.name}_count ${this.#count}`,
    ].join("\n");
  }
}

/**
 * One value without labels, read each time the metrics are read: a counter or a gauge kept by
 * someone else (the kernel, the runtime). When `read` gives undefined the family has no sample:
 * a value that cannot be read now is left out rather than shown as 0.
 */
export class ReadOnScrape implements Family {
  readonly name: string;
  readonly #help: string;
  readonly #type: "counter" | "gauge";
  readonly #read: () => number | undefined;

  constructor(
    options: FamilyOptions<never> & {
      type: "counter" | "gauge";
      read: () => number | undefined;
    },
  ) {
    this.name = options.name;
    this.#help = options.help;
    this.#type = options.type;
    this.#read = options.read;
    for (const registry of options.registers) registry.registerMetric(this);
  }

  text(): string {
    const value = this.#read();
    return [
      ...header(this.name, this.#help, this.#type),
      ...(value === undefined ? [] : [`${this.name} ${formatValue(value)}`]),
    ].join("\n");
  }
}
