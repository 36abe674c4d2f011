/**
 * The simulated kubelet's pod lifecycle on a clock the test moves: admission (NodeAffinity,
 * NodePorts), the
 * wait for services, port-in-use exits with the restart back-off, kills and power cuts, and the
 * garbage collection of dead containers and sandboxes.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import type { Pod } from "../../lib/core/pod.ts";
import { millisBetween, SimClock } from "../../lib/sim/clock.ts";
import {
  KUBELET_TIMINGS,
  KubeletModel,
  type KubeletTimings,
  NODE_AFFINITY_REJECTION,
  NODE_PORTS_REJECTION,
  type PodSources,
} from "../../lib/sim/kubelet_model.ts";

const APISERVER_IMAGE = "registry.k8s.io/kube-apiserver:v1.34.2";
/** A program that exits as it starts: a wrong flag, a broken image. */
const BROKEN_IMAGE = "registry.k8s.io/kube-apiserver:v1.34.2-typo";

interface PodFields {
  hostNetwork?: boolean;
  ports?: Record<string, unknown>[];
  image?: string;
  status?: Record<string, unknown>;
}

function pod(id: string, fields: PodFields = {}): Pod {
  const [namespace, name] = id.split("/");
  return {
    metadata: { namespace, name, uid: `uid-${name}` },
    spec: {
      hostNetwork: fields.hostNetwork ?? true,
      containers: [{
        name: "main",
        image: fields.image ?? APISERVER_IMAGE,
        ...(fields.ports ? { ports: fields.ports } : {}),
      }],
    },
    ...(fields.status ? { status: fields.status } : {}),
  };
}

/** The parent declares its port; its copy runs the same program and declares none. */
const PARENT = pod("kube-system/kube-apiserver", {
  ports: [{ name: "https", containerPort: 6443 }],
});
const COPY = pod("kube-system/kube-apiserver-cp-1");
const OLD_COPY = pod("kube-system/kube-apiserver-cp-1", { ports: [{ containerPort: 6443 }] });

class Kubelet {
  readonly clock = new SimClock();
  readonly model: KubeletModel;
  sources: PodSources = { files: [] };

  constructor(timings: Partial<KubeletTimings> = {}) {
    this.model = new KubeletModel(
      { ...KUBELET_TIMINGS, ...timings },
      (container) => container.image === APISERVER_IMAGE ? [{ protocol: "TCP", port: 6443 }] : [],
      (container) => container.image === BROKEN_IMAGE,
      { "node-role.kubernetes.io/control-plane": "" },
    );
  }

  sync(sources: Partial<PodSources> = {}) {
    this.sources = { ...this.sources, ...sources };
    this.model.sync(this.clock.now(), this.sources);
  }

  /** Seconds pass, the kubelet relisting every second. */
  wait(seconds: number) {
    for (let s = 0; s < seconds; s++) {
      this.clock.advance(1_000);
      this.sync();
    }
  }

  /** Each container of the pod's newest sandbox, `state` or `state#attempt`. */
  containers(name: string): string[] {
    const sandbox = this.model.runtimePods().findLast((p) => p.name === name);
    return (sandbox?.containers ?? []).map((c) => `${c.state}#${c.attempt}`);
  }

  status(name: string) {
    return this.model.apiPods().find((p) => p.metadata.name === name)?.status;
  }

  /** Seconds since the start of the test at which the pod's container started. */
  starts(name: string, since: bigint): number[] {
    return this.model.events
      .filter((e) =>
        e.pod.endsWith(`/${name}`) &&
        (e.event === "container-running" || e.event === "container-exited")
      )
      .map((e) => millisBetween(since, e.at) / 1000);
  }
}

Deno.test("admission: a copy declaring the parent's host port gets the parent rejected for good (NodePorts)", () => {
  const k = new Kubelet();
  k.sync({ files: [OLD_COPY] });
  k.sync({ api: [PARENT] });
  assertEquals(k.status("kube-apiserver"), { phase: "Failed", ...NODE_PORTS_REJECTION });
  assertEquals(k.model.runtimePods().map((p) => p.name), ["kube-apiserver-cp-1"]);
  assertEquals(k.model.events.map((e) => [e.pod, e.event, e.detail]).slice(-1), [[
    "kube-system/kube-apiserver",
    "rejected",
    "Pod was rejected: Predicate NodePorts failed",
  ]]);
  // Never retried, not even once the copy is gone: a rejected pod is over for the kubelet.
  k.sync({ files: [] });
  k.wait(600);
  assertEquals(k.model.runtimePods().filter((p) => p.name === "kube-apiserver"), []);
  // A kubelet that boots again reads the status from the API server and does not run it either.
  const stored = { ...PARENT, status: k.status("kube-apiserver") };
  k.model.powerCut(k.clock.now());
  k.sync({ api: [stored] });
  k.wait(60);
  assertEquals(k.model.runtimePods().filter((p) => p.name === "kube-apiserver"), []);
});

Deno.test("admission: a pod whose nodeSelector the node's labels do not match is rejected for good (NodeAffinity)", () => {
  const k = new Kubelet();
  const selecting = (nodeSelector: Record<string, string>): Pod => {
    const p = pod(`tenant/${Object.keys(nodeSelector).join("-") || "none"}`);
    return { ...p, spec: { ...p.spec, nodeSelector } };
  };
  const matching = selecting({ "node-role.kubernetes.io/control-plane": "" });
  const other = selecting({ "example.com/gpu": "true" });
  k.sync({ api: [matching, other] });
  assertEquals(k.status(other.metadata.name), { phase: "Failed", ...NODE_AFFINITY_REJECTION });
  k.wait(60);
  assertEquals(k.model.runtimePods().map((p) => p.name), [matching.metadata.name]);
});

Deno.test("admission: the same protocol and port conflict on the same or any address", () => {
  const port = (fields: Record<string, unknown>) => ({ containerPort: 6443, ...fields });
  const table: [string, Record<string, unknown>, Record<string, unknown>, boolean][] = [
    ["both every address", port({}), port({}), true],
    ["UDP beside TCP", port({ protocol: "UDP" }), port({}), false],
    ["two addresses", port({ hostIP: "10.0.0.1" }), port({ hostIP: "10.0.0.2" }), false],
    ["an address beside every address", port({ hostIP: "10.0.0.1" }), port({}), true],
    ["every address beside an address", port({}), port({ hostIP: "10.0.0.1" }), true],
    ["the copy declares none", {}, port({}), false],
  ];
  for (const [label, running, returning, rejected] of table) {
    const k = new Kubelet();
    const copyPorts = Object.keys(running).length > 0 ? [running] : undefined;
    k.sync({ files: [pod("kube-system/copy", { ports: copyPorts, image: "other" })] });
    k.sync({ api: [pod("kube-system/parent", { ports: [returning], image: "other" })] });
    assertEquals(k.status("parent")?.phase === "Failed", rejected, label);
  }
});

Deno.test("a pod from the API server gets its sandbox at once, its containers once the services are read", () => {
  const k = new Kubelet({ servicesReadAfterMs: 2_000 });
  const start = k.clock.now();
  k.sync({ api: [PARENT], files: [pod("kube-system/etcd", { image: "etcd" })] });
  // The static pod does not wait for the services.
  assertEquals(k.containers("etcd"), ["running#0"]);
  assertEquals(k.model.runtimePods().find((p) => p.name === "kube-apiserver")?.ready, true);
  assertEquals(k.containers("kube-apiserver"), []);
  assertEquals(k.status("kube-apiserver"), {
    phase: "Pending",
    conditions: [{ type: "Ready", status: "False" }],
    containerStatuses: [{
      name: "main",
      ready: false,
      restartCount: 0,
      state: {
        waiting: {
          reason: "CreateContainerConfigError",
          message: "services have not yet been read at least once, cannot construct envvars",
        },
      },
    }],
  });
  // The services are read 2 s later, but the failed sync is only tried again after 10 s.
  k.wait(9);
  assertEquals(k.containers("kube-apiserver"), []);
  k.wait(1);
  assertEquals(k.containers("kube-apiserver"), ["running#0"]);
  assertEquals(k.starts("kube-apiserver", start), [10]);
  assertEquals(k.status("kube-apiserver")?.phase, "Running");
  assertEquals(k.status("kube-apiserver")?.conditions, [{ type: "Ready", status: "True" }]);
});

Deno.test("a container that finds its port taken exits; it is restarted at once, then after the back-off", () => {
  const k = new Kubelet();
  const start = k.clock.now();
  k.sync({ files: [COPY] });
  k.sync({ api: [PARENT] });
  assertEquals(k.containers("kube-apiserver"), ["exited#0"]);
  assertEquals(
    k.model.events.findLast((e) => e.event === "container-exited")?.detail,
    "address already in use: 6443/TCP",
  );
  k.wait(80);
  // At once; then 10 s after the second exit (seen a second later, retried 10 s after that);
  // then 20 s, 40 s, each found by the next sync after it has passed.
  assertEquals(k.starts("kube-apiserver", start), [0, 1, 12, 33, 74]);
  const waiting = (k.status("kube-apiserver") as { containerStatuses: { state: unknown }[] })
    .containerStatuses[0].state;
  assertEquals(waiting, {
    waiting: {
      reason: "CrashLoopBackOff",
      message: "back-off 1m20s restarting failed container=main pod=kube-system/kube-apiserver",
    },
  });
  // The copy goes: the next restart binds the port and stays up.
  k.sync({ files: [] });
  k.wait(90);
  assertEquals(k.starts("kube-apiserver", start), [0, 1, 12, 33, 74, 155]);
  assertEquals(k.containers("kube-apiserver").at(-1), "running#5");
});

Deno.test("the restart back-off stops doubling at its maximum", () => {
  const k = new Kubelet({ restartBackoffMs: 10_000, maxRestartBackoffMs: 20_000 });
  const start = k.clock.now();
  k.sync({ files: [COPY], api: [PARENT] });
  k.wait(120);
  const starts = k.starts("kube-apiserver", start);
  const gaps = starts.slice(1).map((t, i) => t - starts[i]);
  assertEquals(gaps, [1, 11, 21, 21, 21, 21, 21]);
});

Deno.test("a pod no source lists is killed; a power cut leaves NOTREADY sandboxes with EXITED containers, and new ones follow", () => {
  const k = new Kubelet();
  k.sync({ files: [COPY], api: [pod("kube-system/scheduler", { image: "scheduler" })] });
  k.sync({ files: [] });
  assertEquals(
    k.model.runtimePods().map((p) => [p.name, p.ready, p.containers!.map((c) => c.state)]),
    [["kube-apiserver-cp-1", false, ["exited"]], ["scheduler", true, ["running"]]],
  );
  k.model.powerCut(k.clock.now());
  k.sync({ api: undefined, files: [COPY] });
  // Without the API server the kubelet knows only its static pods.
  assertEquals(
    k.model.runtimePods().map((p) => [p.name, p.attempt, p.ready, p.containers![0].state]),
    [
      ["kube-apiserver-cp-1", 0, false, "exited"],
      ["scheduler", 0, false, "exited"],
      ["kube-apiserver-cp-1", 1, true, "running"],
    ],
  );
  k.sync({ api: [pod("kube-system/scheduler", { image: "scheduler" })] });
  assertEquals(k.containers("scheduler"), ["running#0"]);
  assertEquals(k.model.runtimePods().filter((p) => p.name === "scheduler").length, 2);
});

Deno.test("a program that exits as it starts crash-loops and its pod is never Ready", () => {
  const k = new Kubelet();
  const start = k.clock.now();
  k.sync({ api: [pod("kube-system/kube-apiserver", { image: BROKEN_IMAGE })] });
  k.wait(60);
  // At once, then after 10 s and 20 s of back-off, each counted from the relist that saw it.
  assertEquals(k.starts("kube-apiserver", start), [0, 1, 12, 33]);
  assertEquals(k.status("kube-apiserver")?.conditions, [{ type: "Ready", status: "False" }]);
  assertEquals(k.status("kube-apiserver")?.phase, "Running");
});

/** Each sandbox in the runtime: name, attempt, ready, and its containers' states. */
function runtimeRows(k: Kubelet) {
  return k.model.runtimePods().map((p) => [
    p.name,
    p.attempt,
    p.ready,
    p.containers!.map((c) => `${c.state}#${c.attempt}`),
  ]);
}

Deno.test("garbage collection, once a minute: of a crash-looping container only the newest dead one stays", () => {
  const k = new Kubelet();
  k.sync({ api: [pod("kube-system/kube-apiserver", { image: BROKEN_IMAGE })] });
  k.wait(59);
  const dead = ["exited#0", "exited#1", "exited#2", "exited#3"];
  assertEquals(runtimeRows(k), [["kube-apiserver", 0, true, dead]]);
  k.wait(1);
  assertEquals(runtimeRows(k), [["kube-apiserver", 0, true, ["exited#3"]]]);
});

Deno.test("garbage collection: a pod no longer run loses its containers and sandboxes once the API server answered; a pod run keeps its newest dead container and sandbox", () => {
  const k = new Kubelet();
  const scheduler = pod("kube-system/scheduler", { image: "scheduler" });
  k.sync({ files: [COPY], api: [scheduler] });
  k.sync({ files: [] });
  k.model.powerCut(k.clock.now());
  k.sync({ api: undefined });
  k.wait(60);
  // Without the API server the kubelet does not know which pods are gone: it removes nothing.
  assertEquals(runtimeRows(k), [
    ["kube-apiserver-cp-1", 0, false, ["exited#0"]],
    ["scheduler", 0, false, ["exited#0"]],
  ]);
  k.sync({ api: [scheduler] });
  k.wait(60);
  assertEquals(runtimeRows(k), [
    ["scheduler", 0, false, ["exited#0"]],
    ["scheduler", 1, true, ["running#0"]],
  ]);
  k.model.powerCut(k.clock.now());
  k.sync({ api: [scheduler] });
  k.wait(59);
  assertEquals(runtimeRows(k).length, 3);
  k.wait(1);
  assertEquals(runtimeRows(k), [
    ["scheduler", 1, false, ["exited#0"]],
    ["scheduler", 2, true, ["running#0"]],
  ]);
});

Deno.test("a pod the kubelet forgets while the API server is away stays stopped until the API server lists it again", () => {
  const k = new Kubelet();
  const scheduler = pod("kube-system/scheduler", { image: "scheduler" });
  k.sync({ api: [scheduler] });
  k.sync({ api: undefined });
  k.model.forget("uid-scheduler", k.clock.now());
  k.wait(30);
  assertEquals(runtimeRows(k), [["scheduler", 0, false, ["exited#0"]]]);
  k.sync({ api: [scheduler] });
  assertEquals(runtimeRows(k), [
    ["scheduler", 0, false, ["exited#0"]],
    ["scheduler", 1, true, ["running#0"]],
  ]);
});
