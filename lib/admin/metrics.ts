/**
 * The agent's Prometheus metrics (lib/admin/exposition.ts), on a registry of its own, so two
 * daemons in one process — as in tests — never share counters.
 *
 * Counters and the duration histogram are fed by every pass the daemon runs (`onPass`); gauges
 * that describe the present (checkpoints by state, sandbox checkpoints, last pass times, stalled
 * starts, crash-looping parents) are read from the daemon when scraped, so they are never stale,
 * and so are the certificates' expiries, from their files.
 *
 * Every label's values are listed in its family's help, written from the same list the code
 * takes them from (LABEL_VALUES): a value the code can give and the help does not name is a type
 * error.
 *
 * The standard process metrics, as Prometheus's client libraries export them, are read when
 * scraped (process_metrics.ts). No `nodejs_*` series (a Node client library's default metrics):
 * under Deno they describe Node internals Deno only emulates (active handles and requests always
 * read 0).
 */
import { Counter, Gauge, Histogram, ReadOnScrape, Registry } from "./exposition.ts";
import {
  type PassReport,
  PERMISSION_ERROR_PLACES,
  permissionErrors,
  type WriteOp,
} from "../pass/report.ts";
import { STATE_NAMES } from "../core/state.ts";
import { type Instant, NANOS_PER_MILLI } from "../core/time.ts";
import type { Daemon } from "../daemon/daemon.ts";
import type { PassCause, Trigger } from "../daemon/pass_scheduler.ts";
import { STATUS_STATES } from "../store/status_record.ts";
import { NOT_READY_REASONS } from "../daemon/probes.ts";
import { certificateExpiries, type CertificateName } from "../sources/certificates.ts";
import type { FailureKind, SourceName } from "../sources/types.ts";
import type { StoreName } from "../store/agent_stores.ts";
import type { VersionInfo } from "../version_info.ts";
import { cpuSeconds, ProcSelf, residentMemoryBytes, startTimeSeconds } from "./process_metrics.ts";

const PREFIX = "ckpt_agent_";

/** From a fast local pass (milliseconds) to one that waited on a runtime timeout (minutes). */
export const PASS_DURATION_BUCKETS = [
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  30,
  60,
  120,
];

export type PassResultLabel = "complete" | "degraded";

/** A label's values, with what a value means where its name does not say it. */
type Described<V extends string> = Record<V, string>;

/**
 * The values of each label, for the code that fills the families and for their help. Lists the
 * code already keeps are used as they are; a label whose values are a type is described here by
 * a record over that type, so a value added to the type is a type error until it is listed
 * (tests/admin/metrics_test.ts checks what a scrape shows against them).
 */
export const LABEL_VALUES = {
  result: {
    complete: "every source answered, every write succeeded",
    degraded: "",
  } satisfies Described<PassResultLabel>,
  trigger: {
    start: "the first pass",
    poll: "every poll interval",
    change: "a source",
    apiserver: "the API server was lost or is back",
    files: "the static-pod or inactive dir",
    deadline: "a grace period or a start's timeout ends",
    request: "the admin API",
  } satisfies Described<Trigger>,
  state: STATE_NAMES,
  trackedState: STATUS_STATES,
  source: { apiserver: "", kubelet: "", runtime: "" } satisfies Described<SourceName>,
  kind: {
    unreachable: "",
    timeout: "",
    "server-error": "5xx",
    unauthorized: "401",
    forbidden: "403",
    "not-found": "404",
    "bad-response": "",
    misconfigured: "no client could be built",
    "not-permitted": "a permission the agent runs without: a configuration error, never an outage",
  } satisfies Described<FailureKind>,
  op: {
    checkpoint: "a checkpoint's manifest or stored files",
    start: "",
    stop: "",
    remove: "",
    status: "a status record",
    "sandbox-record": "",
    "sandbox-forget": "",
  } satisfies Described<WriteOp>,
  where: {
    apiserver: "asking that source",
    kubelet: "asking that source",
    runtime: "asking that source",
    pass: "the pass's own writes",
  } satisfies Described<typeof PERMISSION_ERROR_PLACES[number]>,
  reason: NOT_READY_REASONS,
  store: { status: "", sandboxes: "" } satisfies Described<StoreName>,
  certificate: {
    client: "the kubeconfig's client certificate",
    "cluster-ca": "the kubeconfig's cluster CA",
    "kubelet-ca": "kubeletCaFile",
  } satisfies Described<CertificateName>,
};

/** The values as a list, in the order they are described. */
export function labelValues(values: Described<string> | readonly string[]): string[] {
  return Array.isArray(values) ? [...values] : Object.keys(values);
}

/** `label: a (what a means), b, c`: a family's help lists its label's every value. */
function valuesHelp(label: string, values: Described<string> | readonly string[]): string {
  const said = labelValues(values).map((value) => {
    const meaning = Array.isArray(values) ? "" : (values as Described<string>)[value];
    return meaning ? `${value} (${meaning})` : value;
  });
  return `${label}: ${said.join(", ")}`;
}

function seconds(t: Instant | undefined): number {
  return t === undefined ? 0 : Number(t / NANOS_PER_MILLI) / 1000;
}

export class AdminMetrics {
  readonly registry = new Registry();
  readonly #passes: Counter<"result">;
  readonly #passesByTrigger: Counter<"trigger">;
  readonly #duration: Histogram;
  readonly #transitions: Counter<"from" | "to">;
  readonly #sourceErrors: Counter<"source" | "kind">;
  readonly #writeErrors: Counter<"op">;
  readonly #permissionErrors: Counter<"where">;
  readonly #bytesWritten: Counter;
  readonly #promotions: Counter;
  readonly #rollbacks: Counter;
  readonly #inheritances: Counter;

  /**
   * Registers the metrics and subscribes to the daemon's passes; `build` is what this agent is
   * (ckpt_agent_build_info).
   */
  constructor(daemon: Daemon, build: VersionInfo) {
    const registers = [this.registry];
    new Gauge({
      name: `${PREFIX}build_info`,
      help: "Always 1, labelled with what this agent is: version (deno.json), commit (the git " +
        "commit it was built from, -dirty when the tree differed; unknown when not known) and " +
        "deno (the Deno it runs on).",
      labelNames: ["version", "commit", "deno"],
      registers,
    }).set({ version: build.version, commit: build.commit, deno: build.deno }, 1);
    this.#passes = this.#passCounter(
      "passes_total",
      `Passes run; ${valuesHelp("result", LABEL_VALUES.result)}.`,
      "result",
      labelValues(LABEL_VALUES.result),
    );
    this.#passesByTrigger = this.#passCounter(
      "passes_by_trigger_total",
      `Passes run, by what asked first for each; ${valuesHelp("trigger", LABEL_VALUES.trigger)}.`,
      "trigger",
      labelValues(LABEL_VALUES.trigger),
    );
    this.#duration = new Histogram({
      name: `${PREFIX}pass_duration_seconds`,
      help: "How long a pass took, from observing the node to persisting its status.",
      buckets: PASS_DURATION_BUCKETS,
      registers,
    });
    this.#transitions = new Counter({
      name: `${PREFIX}state_transitions_total`,
      help: "Checkpoint state changes, by the state left and the state entered; " +
        `${valuesHelp("from and to", LABEL_VALUES.state)}.`,
      labelNames: ["from", "to"],
      registers,
    });
    this.#sourceErrors = new Counter({
      name: `${PREFIX}source_errors_total`,
      help: "Passes in which a source did not answer, by source and kind of failure; " +
        `${valuesHelp("source", LABEL_VALUES.source)}; ${valuesHelp("kind", LABEL_VALUES.kind)}.`,
      labelNames: ["source", "kind"],
      registers,
    });
    this.#writeErrors = new Counter({
      name: `${PREFIX}write_errors_total`,
      help: `Writes a pass could not make, by operation; ${valuesHelp("op", LABEL_VALUES.op)}.`,
      labelNames: ["op"],
      registers,
    });
    this.#permissionErrors = this.#passCounter(
      "permission_errors_total",
      "Permissions the agent runs without, met in a pass (a configuration error of ours, never " +
        "an outage: every checkpoint holds its state; the log names the flag), by where; " +
        `${valuesHelp("where", LABEL_VALUES.where)}.`,
      "where",
      labelValues(LABEL_VALUES.where),
    );
    this.#bytesWritten = new Counter({
      name: `${PREFIX}bytes_written_total`,
      help: "Bytes written: manifests, stored secret and configmap files, state records.",
      registers,
    });
    this.#promotions = new Counter({
      name: `${PREFIX}promotions_total`,
      help: "Candidates promoted: a parent's new spec made the checkpoint's kept version.",
      registers,
    });
    this.#inheritances = new Counter({
      name: `${PREFIX}inheritances_total`,
      help: "New parents (a DaemonSet rollout's new pod) that inherited their predecessor's " +
        "version in place as their first checkpoint.",
      registers,
    });
    this.#rollbacks = new Counter({
      name: `${PREFIX}rollbacks_total`,
      help: "Rollbacks an operator made that changed the checkpoint's kept version.",
      registers,
    });
    this.#readAtScrape(
      `${PREFIX}candidates_waiting`,
      "Parents whose new spec waits to be promoted (not Ready long enough, or pinned).",
      [],
      (g) => g.set(daemon.agent.candidatesWaiting),
    );
    this.#readAtScrape(
      `${PREFIX}crash_looping_parents`,
      "Parents the last pass judged crash-looping on an unproven spec (restarting, never Ready, " +
        "for crashLoopAfter): they do not count as running, and their checkpoint's kept version " +
        "stands in for them until they are Ready.",
      [],
      (g) => g.set(Object.keys(daemon.lastReport?.crashLooping ?? {}).length),
    );
    this.#readAtScrape(
      `${PREFIX}checkpoints`,
      `Tracked checkpoints, by state; ${valuesHelp("state", LABEL_VALUES.trackedState)}.`,
      ["state"],
      (g) => {
        const counts = new Map<string, number>(STATUS_STATES.map((state) => [state, 0]));
        for (const record of daemon.stores.status.list()) {
          counts.set(record.state, (counts.get(record.state) ?? 0) + 1);
        }
        for (const [state, n] of counts) g.set({ state }, n);
      },
    );
    this.#readAtScrape(
      `${PREFIX}sandbox_checkpoints`,
      "Pod sandboxes of active checkpoints with a stored sandbox checkpoint.",
      [],
      (g) => g.set(daemon.stores.sandboxes.list().length),
    );
    this.#readAtScrape(
      `${PREFIX}last_pass_timestamp_seconds`,
      "When the last pass finished, complete or not (0: none yet).",
      [],
      (g) => g.set(seconds(daemon.lastTick)),
    );
    this.#readAtScrape(
      `${PREFIX}last_complete_pass_timestamp_seconds`,
      "When the last complete pass finished (0: none yet).",
      [],
      (g) => g.set(seconds(daemon.lastCompletePassAt)),
    );
    this.#readAtScrape(
      `${PREFIX}ready`,
      "1 while the node is protected (what /readyz answers 200 for), else 0.",
      [],
      (g) => g.set(daemon.readiness().ready ? 1 : 0),
    );
    this.#readAtScrape(
      `${PREFIX}not_ready`,
      "1 for each reason the node is not protected now (every reason present, 0 included); " +
        `${valuesHelp("reason", LABEL_VALUES.reason)}.`,
      ["reason"],
      (g) => {
        const found = new Set(daemon.readiness().notReady.map((n) => n.reason));
        for (const reason of NOT_READY_REASONS) g.set({ reason }, found.has(reason) ? 1 : 0);
      },
    );
    this.#readAtScrape(
      `${PREFIX}unrecorded_records`,
      "Records the state dir could not take in the last pass, by store; written again each " +
        `pass; ${valuesHelp("store", LABEL_VALUES.store)}.`,
      ["store"],
      (g) => {
        const unrecorded = daemon.stores.unrecorded();
        for (const store of labelValues(LABEL_VALUES.store)) {
          g.set({ store }, unrecorded.filter((u) => u.store === store).length);
        }
      },
    );
    this.#readAtScrape(
      `${PREFIX}stalled_checkpoints`,
      "Checkpoints active for startTimeout whose copy the runtime does not run, as of the last " +
        "pass (0 while the runtime does not answer: nothing is judged).",
      [],
      (g) => g.set(daemon.lastReport?.stalledStarts.length ?? 0),
    );
    this.#readAtScrape(
      `${PREFIX}certificate_expiry_timestamp_seconds`,
      "When a certificate the agent uses expires (notAfter, first of a chain or bundle), read " +
        "from its file when scraped, absent when not configured or not readable; " +
        `${valuesHelp("certificate", LABEL_VALUES.certificate)}.`,
      ["certificate"],
      (g) => {
        g.reset();
        for (const [certificate, notAfter] of certificateExpiries(daemon.config)) {
          g.set({ certificate }, notAfter.getTime() / 1000);
        }
      },
    );
    const proc = new ProcSelf();
    const processMetrics = [
      [
        "process_cpu_seconds_total",
        "counter",
        "Total user and system CPU time spent in seconds.",
        cpuSeconds,
      ],
      [
        "process_resident_memory_bytes",
        "gauge",
        "Resident memory size in bytes.",
        residentMemoryBytes,
      ],
      [
        "process_virtual_memory_bytes",
        "gauge",
        "Virtual memory size in bytes.",
        () => proc.virtualMemoryBytes(),
      ],
      ["process_open_fds", "gauge", "Number of open file descriptors.", () => proc.openFds()],
      ["process_max_fds", "gauge", "Maximum number of open file descriptors.", () => proc.maxFds()],
      [
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since unix epoch in seconds.",
        startTimeSeconds,
      ],
    ] as const;
    for (const [name, type, help, read] of processMetrics) {
      new ReadOnScrape({ name, type, help, read, registers });
    }
    // The listener must never throw: it runs inside the daemon's pass.
    daemon.onPass((report, cause) => this.observe(report, cause));
  }

  /** A counter of passes by one label, every value present from the start. */
  #passCounter<L extends string>(
    name: string,
    help: string,
    label: L,
    values: readonly string[],
  ): Counter<L> {
    const counter = new Counter({
      name: `${PREFIX}${name}`,
      help,
      labelNames: [label],
      registers: [this.registry],
    });
    for (const value of values) counter.inc({ [label]: value } as Record<L, string>, 0);
    return counter;
  }

  /** A gauge whose value is read from the daemon each time it is scraped. */
  #readAtScrape<L extends string>(
    name: string,
    help: string,
    labelNames: L[],
    read: (gauge: Gauge<L>) => void,
  ) {
    new Gauge({
      name,
      help,
      labelNames,
      registers: [this.registry],
      collect() {
        read(this);
      },
    });
  }

  /** Counts one finished pass. */
  observe(report: PassReport, cause: PassCause) {
    this.#passes.inc({ result: report.complete ? "complete" : "degraded" });
    this.#passesByTrigger.inc({ trigger: cause.trigger });
    this.#duration.observe(report.durationMs / 1000);
    for (const change of report.changes) {
      this.#transitions.inc({ from: change.from, to: change.to });
    }
    for (const failure of report.failures) {
      this.#sourceErrors.inc({ source: failure.source, kind: failure.kind });
    }
    for (const error of report.errors) this.#writeErrors.inc({ op: error.op });
    for (const { where } of permissionErrors(report)) this.#permissionErrors.inc({ where });
    this.#bytesWritten.inc(report.bytesWritten);
    this.#promotions.inc(report.applied.filter((a) => a.op === "promote").length);
    this.#inheritances.inc(report.applied.filter((a) => a.op === "inherit").length);
  }

  /** Counts an operator's rollback that changed the kept version. */
  rolledBack() {
    this.#rollbacks.inc();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The exposition text, with every gauge read now. */
  text(): Promise<string> {
    return this.registry.metrics();
  }
}
