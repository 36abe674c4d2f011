/**
 * GET /metrics scraped over HTTP after known passes, parsed back with a Prometheus text parser:
 * names, types, label sets and values.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { dirname, join } from "node:path";
import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { KUBELET_CA_OFF } from "../../lib/config/types.ts";
import { writeKubeconfig } from "../../lib/sim/pki.ts";
import { withTempDir } from "../helpers/temp_dir.ts";
import { type PassReport, PERMISSION_ERROR_PLACES } from "../../lib/pass/report.ts";
import { LABEL_VALUES, labelValues, PASS_DURATION_BUCKETS } from "../../lib/admin/metrics.ts";
import { STATE_NAMES } from "../../lib/core/state.ts";
import { versionInfo } from "../../lib/version_info.ts";
import { agentDenoFlags } from "../../scripts/permissions.ts";
import { TRIGGERS } from "../../lib/daemon/pass_scheduler.ts";
import { NOT_READY_REASONS } from "../../lib/daemon/probes.ts";
import { NANOS_PER_MILLI } from "../../lib/core/time.ts";
import { STATUS_STATES } from "../../lib/store/status_record.ts";
import {
  type Family,
  parsePrometheusText,
  promtoolCheckMetrics,
  sampleValue,
} from "./prom_text.ts";
import { APISERVER, badRollout, type ServedFixture, START, withServedDaemon } from "./harness.ts";
import { podId } from "../../lib/core/pod.ts";
import { containerOf, POLL_MS, runFor } from "../helpers/promotion.ts";

async function scrape(f: ServedFixture): Promise<Map<string, Family>> {
  const response = await f.request("/metrics");
  assertEquals(response.status, 200);
  assertEquals(response.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  return parsePrometheusText(await response.text());
}

function labelSets(family: Family | undefined): string[][] {
  return [...new Set(family!.samples.map((s) => JSON.stringify(Object.keys(s.labels).sort())))]
    .map((k) => JSON.parse(k));
}

const seconds = (t: bigint) => Number(t / NANOS_PER_MILLI) / 1000;

Deno.test("metrics: every family with its type and labels, before any pass", async () => {
  await withServedDaemon({}, async (f) => {
    const m = await scrape(f);
    const types = Object.fromEntries([...m.values()].map((family) => [family.name, family.type]));
    assertEquals(types, {
      ckpt_agent_build_info: "gauge",
      ckpt_agent_passes_total: "counter",
      ckpt_agent_passes_by_trigger_total: "counter",
      ckpt_agent_pass_duration_seconds: "histogram",
      ckpt_agent_state_transitions_total: "counter",
      ckpt_agent_source_errors_total: "counter",
      ckpt_agent_write_errors_total: "counter",
      ckpt_agent_permission_errors_total: "counter",
      ckpt_agent_bytes_written_total: "counter",
      ckpt_agent_promotions_total: "counter",
      ckpt_agent_rollbacks_total: "counter",
      ckpt_agent_inheritances_total: "counter",
      ckpt_agent_candidates_waiting: "gauge",
      ckpt_agent_crash_looping_parents: "gauge",
      ckpt_agent_checkpoints: "gauge",
      ckpt_agent_sandbox_checkpoints: "gauge",
      ckpt_agent_last_pass_timestamp_seconds: "gauge",
      ckpt_agent_last_complete_pass_timestamp_seconds: "gauge",
      ckpt_agent_ready: "gauge",
      ckpt_agent_not_ready: "gauge",
      ckpt_agent_unrecorded_records: "gauge",
      ckpt_agent_stalled_checkpoints: "gauge",
      ckpt_agent_certificate_expiry_timestamp_seconds: "gauge",
      process_cpu_seconds_total: "counter",
      process_resident_memory_bytes: "gauge",
      process_virtual_memory_bytes: "gauge",
      process_open_fds: "gauge",
      process_max_fds: "gauge",
      process_start_time_seconds: "gauge",
    });
    for (const family of m.values()) assert(family.help.length > 0, family.name);
    assertEquals(sampleValue(m, "ckpt_agent_passes_total", { result: "complete" }), 0);
    assertEquals(sampleValue(m, "ckpt_agent_passes_total", { result: "degraded" }), 0);
    for (const trigger of TRIGGERS) {
      assertEquals(sampleValue(m, "ckpt_agent_passes_by_trigger_total", { trigger }), 0);
    }
    for (const where of PERMISSION_ERROR_PLACES) {
      assertEquals(sampleValue(m, "ckpt_agent_permission_errors_total", { where }), 0);
    }
    for (const state of STATUS_STATES) {
      assertEquals(sampleValue(m, "ckpt_agent_checkpoints", { state }), 0);
    }
    assertEquals(sampleValue(m, "ckpt_agent_last_complete_pass_timestamp_seconds"), 0);
    assertEquals(sampleValue(m, "ckpt_agent_ready"), 0);
    for (const reason of NOT_READY_REASONS) {
      assertEquals(
        sampleValue(m, "ckpt_agent_not_ready", { reason }),
        reason === "no-pass" ? 1 : 0,
      );
    }
    for (const store of ["status", "sandboxes"]) {
      assertEquals(sampleValue(m, "ckpt_agent_unrecorded_records", { store }), 0);
    }
    assertEquals(m.get("ckpt_agent_state_transitions_total")!.samples, []);
    assertEquals(sampleValue(m, "ckpt_agent_stalled_checkpoints"), 0);
    for (
      const name of [
        "promotions_total",
        "rollbacks_total",
        "inheritances_total",
        "candidates_waiting",
        "crash_looping_parents",
      ]
    ) {
      assertEquals(sampleValue(m, `ckpt_agent_${name}`), 0, name);
    }
    assert(sampleValue(m, "process_resident_memory_bytes")! > 0);
    assert(sampleValue(m, "process_start_time_seconds")! > 1e9);
  });
});

Deno.test("metrics: values after known passes, complete and degraded", async () => {
  await withServedDaemon({}, async (f) => {
    const reports: PassReport[] = [];
    reports.push(await f.pass()); // complete: three parents checkpointed
    const completeAt = f.clock.now();
    f.clock.advance(5_000);
    await f.node.loseControlPlane();
    reports.push(await f.pass()); // degraded: all three activated
    f.clock.advance(5_000);
    reports.push(await f.pass()); // degraded: their sandboxes recorded
    f.clock.advance(5_000);
    await f.node.stopRuntime();
    reports.push(await f.pass()); // degraded: the runtime is gone too
    const lastAt = f.clock.now();

    const m = await scrape(f);
    assertEquals(sampleValue(m, "ckpt_agent_passes_total", { result: "complete" }), 1);
    assertEquals(sampleValue(m, "ckpt_agent_passes_total", { result: "degraded" }), 3);
    assertEquals(labelSets(m.get("ckpt_agent_passes_total")), [["result"]]);
    // The test runs each pass itself, as POST /v1/reconcile does.
    for (const trigger of TRIGGERS) {
      const n = sampleValue(m, "ckpt_agent_passes_by_trigger_total", { trigger });
      assertEquals([trigger, n], [trigger, trigger === "request" ? 4 : 0]);
    }

    // The test's clock stands still during a pass: every pass took 0 s.
    const duration = m.get("ckpt_agent_pass_duration_seconds")!;
    assertEquals(
      duration.samples.filter((s) => s.name.endsWith("_bucket")).map((s) => [s.labels.le, s.value]),
      [...PASS_DURATION_BUCKETS.map((b) => [String(b), 4]), ["+Inf", 4]],
    );
    assertEquals(
      sampleValue(
        m,
        "ckpt_agent_pass_duration_seconds",
        {},
        "ckpt_agent_pass_duration_seconds_count",
      ),
      4,
    );
    assertEquals(
      sampleValue(
        m,
        "ckpt_agent_pass_duration_seconds",
        {},
        "ckpt_agent_pass_duration_seconds_sum",
      ),
      0,
    );

    const transitions = m.get("ckpt_agent_state_transitions_total")!;
    assertEquals(labelSets(transitions), [["from", "to"]]);
    assertEquals(transitions.samples.map((s) => [s.labels.from, s.labels.to, s.value]), [
      ["none", "inactive", 3],
      ["inactive", "active", 3],
    ]);

    const sourceErrors = m.get("ckpt_agent_source_errors_total")!;
    assertEquals(labelSets(sourceErrors), [["kind", "source"]]);
    assertEquals(
      sourceErrors.samples.map((s) => [s.labels.source, s.labels.kind, s.value]).sort(),
      [["apiserver", "unreachable", 3], ["kubelet", "forbidden", 3], ["runtime", "unreachable", 1]],
    );

    assertEquals(
      STATUS_STATES.map((state) => [state, sampleValue(m, "ckpt_agent_checkpoints", { state })]),
      STATUS_STATES.map((state) => [state, state === "active" ? 3 : 0]),
    );
    assertEquals(sampleValue(m, "ckpt_agent_sandbox_checkpoints"), 3);
    const bytes = reports.reduce((n, r) => n + r.bytesWritten, 0);
    assert(bytes > 0);
    assertEquals(sampleValue(m, "ckpt_agent_bytes_written_total"), bytes);
    assertEquals(
      sampleValue(m, "ckpt_agent_last_complete_pass_timestamp_seconds"),
      seconds(completeAt),
    );
    assertEquals(seconds(completeAt), seconds(START));
    assertEquals(sampleValue(m, "ckpt_agent_last_pass_timestamp_seconds"), seconds(lastAt));
    assertEquals(m.get("ckpt_agent_write_errors_total")!.samples, []);
  });
});

Deno.test("metrics: failed writes are counted by operation, and make the pass degraded", async () => {
  await withServedDaemon({}, async (f) => {
    // Files where the secret and configmap directories should be: no volume file can be stored.
    for (const dir of [f.config.secretsDir, f.config.configmapsDir]) {
      await Deno.writeTextFile(dir, "in the way\n");
    }
    const report = await f.pass();
    assertEquals(report.failures, []);
    assertEquals(report.errors.length, 3);

    const m = await scrape(f);
    assertEquals(labelSets(m.get("ckpt_agent_write_errors_total")), [["op"]]);
    assertEquals(sampleValue(m, "ckpt_agent_write_errors_total", { op: "checkpoint" }), 3);
    assertEquals(sampleValue(m, "ckpt_agent_passes_total", { result: "degraded" }), 1);
    assertEquals(sampleValue(m, "ckpt_agent_last_complete_pass_timestamp_seconds"), 0);
    // No secret and no configmap can be stored: the node is not protected.
    const ready = await f.request("/readyz");
    const body = await ready.json();
    assertEquals([ready.status, body.notReady.map((n: { reason: string }) => n.reason)], [
      503,
      ["secrets-dir", "configmaps-dir"],
    ]);
    assert(body.error.startsWith(`secrets dir ${f.config.secretsDir}: the last pass could not`));
    assertEquals(body.lastPassFailures, ["3 write(s) failed"]);
    const after = await scrape(f);
    assertEquals(sampleValue(after, "ckpt_agent_ready"), 0);
    for (const reason of NOT_READY_REASONS) {
      const expected = reason === "secrets-dir" || reason === "configmaps-dir" ? 1 : 0;
      assertEquals(sampleValue(after, "ckpt_agent_not_ready", { reason }), expected, reason);
    }
  });
});

/** A self-signed certificate valid until `notAfter` (second precision, as X.509 keeps it). */
async function certificateUntil(notAfter: Date): Promise<string> {
  const algorithm = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
  const keys = await crypto.subtle.generateKey(algorithm, true, ["sign", "verify"]);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    name: "CN=expiry-test",
    keys,
    signingAlgorithm: algorithm,
    notBefore: new Date(notAfter.getTime() - 86_400_000),
    notAfter,
  });
  return `${cert.toString("pem")}\n`;
}

function notAfterOf(pem: string): number {
  return new x509.X509Certificate(pem).notAfter.getTime() / 1000;
}

async function expiries(f: ServedFixture): Promise<Record<string, number>> {
  const family = (await scrape(f)).get("ckpt_agent_certificate_expiry_timestamp_seconds")!;
  return Object.fromEntries(family.samples.map((s) => [s.labels.certificate, s.value]));
}

Deno.test("metrics: when the client certificate, the cluster CA and the kubelet CA expire, read when scraped", async () => {
  await withServedDaemon({}, async (f) => {
    const dir = dirname(f.config.kubeconfig);
    const [client, ca, kubeletCa] = await Promise.all(
      [join(dir, "client.crt"), join(dir, "ca.crt"), f.config.kubeletCaFile!].map((file) =>
        Deno.readTextFile(file)
      ),
    );
    assertEquals(await expiries(f), {
      client: notAfterOf(client),
      "cluster-ca": notAfterOf(ca),
      "kubelet-ca": notAfterOf(kubeletCa),
    });

    // A bundle: the certificate that expires first counts, whatever its place.
    const soon = new Date(Date.UTC(2027, 0, 15, 12, 0, 0));
    const later = new Date(Date.UTC(2030, 5, 1));
    const bundle = await certificateUntil(later) + await certificateUntil(soon);
    await Deno.writeTextFile(f.config.kubeletCaFile!, bundle);
    assertEquals((await expiries(f))["kubelet-ca"], soon.getTime() / 1000);

    // Gone: no series, rather than a stale or a zero one.
    await Deno.remove(f.config.kubeletCaFile!);
    assertEquals(Object.keys(await expiries(f)).sort(), ["client", "cluster-ca"]);
  });
});

Deno.test("metrics: no expiry series for a certificate that is not configured", async () => {
  await withTempDir(async (dir) => {
    const caPem = await certificateUntil(new Date(Date.UTC(2031, 0, 1)));
    const kubeconfig = await writeKubeconfig(dir, {
      server: "https://127.0.0.1:6443",
      caPem,
      token: "a-token",
      embed: "inline",
    });
    for (const kubeletCaFile of [undefined, KUBELET_CA_OFF]) {
      await withServedDaemon({ config: { kubeconfig, kubeletCaFile } }, async (f) => {
        assertEquals(await expiries(f), { "cluster-ca": notAfterOf(caPem) });
      });
    }
  });
});

Deno.test("metrics: a parent crash-looping on an unproven spec is counted while judged so, and not once a good rollout replaced it", async () => {
  const config = { promoteAfterMs: 60_000, pollIntervalMs: POLL_MS };
  await withServedDaemon({ config }, async (f) => {
    await f.pass();
    const good = containerOf(f.node.parents.find((p) => podId(p) === APISERVER)!).image;
    const bad = podId(await badRollout(f));
    const gauges = async () => {
      const m = await scrape(f);
      return {
        crashLooping: sampleValue(m, "ckpt_agent_crash_looping_parents"),
        active: sampleValue(m, "ckpt_agent_checkpoints", { state: "active" }),
        activeGrace: sampleValue(m, "ckpt_agent_checkpoints", { state: "active-grace" }),
      };
    };
    // Restarting, but not yet for crashLoopAfter (30 s) since first seen so.
    await runFor(f, 20_000);
    assertEquals(await gauges(), { crashLooping: 0, active: 0, activeGrace: 0 });
    await runFor(f, 60_000);
    assertEquals(await gauges(), { crashLooping: 1, active: 1, activeGrace: 0 });
    assertEquals(f.daemon.lastReport!.crashLooping, { [bad]: 1 });

    // A good rollout: the crash-looping pod is gone, its checkpoint superseded by the new pod's.
    await f.node.replaceParent(bad, (pod) => {
      containerOf(pod).image = good;
      return pod;
    });
    await runFor(f, 2 * POLL_MS);
    assertEquals(await gauges(), { crashLooping: 0, active: 0, activeGrace: 0 });
    assertEquals(f.daemon.lastReport!.changes.map((c) => [c.id, c.reason]), [
      [bad, "Superseded"],
    ]);
  });
});

Deno.test("metrics: build info, 1, labelled with what `ckpt-agent version` prints", async () => {
  await withServedDaemon({}, async (f) => {
    const family = (await scrape(f)).get("ckpt_agent_build_info")!;
    assertEquals(
      family.samples.map((s) => [s.labels, s.value]),
      [[{ ...await versionInfo() }, 1]],
    );
  });
});

/** The soft limit on open descriptors, as a shell started by this process has it. */
async function softNofile(): Promise<number> {
  const out = await new Deno.Command("sh", { args: ["-c", "ulimit -n"], stdout: "piped" }).output();
  return Number(new TextDecoder().decode(out.stdout).trim());
}

Deno.test("metrics: the process's CPU time, memory, descriptors and start time, read when scraped", async () => {
  await withServedDaemon({}, async (f) => {
    const first = await scrape(f);
    // Work between the scrapes: CPU time goes up and is read again.
    let spin = 0;
    for (let i = 0; i < 2_000_000; i++) spin += i % 7;
    assert(spin > 0);
    const m = await scrape(f);
    const value = (name: string) => sampleValue(m, name)!;
    assert(value("process_cpu_seconds_total") > sampleValue(first, "process_cpu_seconds_total")!);
    assert(value("process_resident_memory_bytes") > 0);
    assert(value("process_virtual_memory_bytes") > value("process_resident_memory_bytes"));
    // This process's descriptors: the admin server's listener among them.
    assert(value("process_open_fds") > 3);
    assertEquals(value("process_max_fds"), await softNofile());
    const start = value("process_start_time_seconds");
    assert(start > 1e9 && start <= Date.now() / 1000, String(start));
  });
});

/** What the process metrics read in a child process with `flags`. */
async function processMetricsWith(flags: string[]): Promise<Record<string, unknown>> {
  const child = new URL("../helpers/process_metrics_child.ts", import.meta.url).pathname;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", ...flags, child],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert(out.success, new TextDecoder().decode(out.stderr));
  return JSON.parse(new TextDecoder().decode(out.stdout));
}

Deno.test("metrics: under the compiled agent's permissions /proc is not read, and its samples are left out; CPU, memory and start time remain", async () => {
  const strict = await processMetricsWith(agentDenoFlags());
  assertEquals(strict, {
    procReadable: false,
    cpu: true,
    rss: true,
    start: true,
    openFds: null,
    maxFds: null,
    virtual: null,
  });
  const all = await processMetricsWith(["--allow-all"]);
  assertEquals(all.procReadable, true);
  assert(typeof all.openFds === "number" && typeof all.maxFds === "number", JSON.stringify(all));
});

/** The values a family's samples give `label`. */
function valuesOf(family: Family, label: string): Set<string> {
  return new Set(family.samples.flatMap((s) => s.labels[label] ?? []));
}

Deno.test("metrics: through an outage, each label's help lists the values the code can give it, and promtool accepts the scrape", async () => {
  await withServedDaemon({}, async (f) => {
    // Passes that give labels values: transitions, source failures, every not-ready reason.
    await f.pass();
    f.clock.advance(5_000);
    await f.node.loseControlPlane();
    await f.pass();
    const text = await (await f.request("/metrics")).text();
    assertEquals(await promtoolCheckMetrics(text), { code: 0, said: "" });
    const m = parsePrometheusText(text);
    const labelled: [string, string, string[]][] = [
      ["ckpt_agent_passes_total", "result", labelValues(LABEL_VALUES.result)],
      ["ckpt_agent_passes_by_trigger_total", "trigger", labelValues(LABEL_VALUES.trigger)],
      ["ckpt_agent_state_transitions_total", "from", labelValues(LABEL_VALUES.state)],
      ["ckpt_agent_state_transitions_total", "to", labelValues(LABEL_VALUES.state)],
      ["ckpt_agent_source_errors_total", "source", labelValues(LABEL_VALUES.source)],
      ["ckpt_agent_source_errors_total", "kind", labelValues(LABEL_VALUES.kind)],
      ["ckpt_agent_write_errors_total", "op", labelValues(LABEL_VALUES.op)],
      ["ckpt_agent_checkpoints", "state", labelValues(LABEL_VALUES.trackedState)],
      ["ckpt_agent_not_ready", "reason", labelValues(LABEL_VALUES.reason)],
      ["ckpt_agent_unrecorded_records", "store", labelValues(LABEL_VALUES.store)],
      [
        "ckpt_agent_certificate_expiry_timestamp_seconds",
        "certificate",
        labelValues(LABEL_VALUES.certificate),
      ],
    ];
    for (const [name, label, values] of labelled) {
      const family = m.get(name)!;
      // Every value the scrape shows is one of the list, and the help names each of the list.
      for (const value of valuesOf(family, label)) {
        assert(values.includes(value), `${name}{${label}="${value}"} is not listed`);
      }
      for (const value of values) {
        assert(new RegExp(`[:,] ${value}[ ,.;]`).test(family.help), `${name}: ${value}`);
      }
    }
    // The lists are the code's own: the triggers the scheduler has, the states of the machine.
    assertEquals(labelValues(LABEL_VALUES.trigger).sort(), [...TRIGGERS].sort());
    assertEquals(labelValues(LABEL_VALUES.state), [...STATE_NAMES]);
    // The trigger the help left out before: the API server lost or back.
    assert(m.get("ckpt_agent_passes_by_trigger_total")!.help.includes("apiserver ("));
  });
});
