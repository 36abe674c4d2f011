/**
 * What the simulated kubelet does with pods, sync by sync, on the node's clock: the parts of
 * pkg/kubelet that decide whether a control plane comes back after an outage.
 *
 * - Admission (kubelet.go HandlePodAdditions, lifecycle/predicate.go): the file source's pods
 *   before the API server's; a pod whose nodeSelector the node's labels do not match is
 *   rejected (the NodeAffinity predicate; a pod bound with `spec.nodeName` never met the
 *   scheduler), and so is a pod declaring a host port that an admitted pod declares (NodePorts):
 *   Failed, never run, never retried.
 * - One ready sandbox per pod; after a power cut a new one (the old ones stay, NOTREADY, their
 *   containers EXITED, as containerd keeps them).
 * - A container of a pod from the API server cannot be made before the kubelet has read the
 *   services once (CreateContainerConfigError); a sync that failed is tried again after a fixed
 *   period (pod_workers.go backOffPeriod, without its jitter).
 * - A container whose program finds its host port taken exits. An exited container is started
 *   again at once the first time, then after the restart back-off (kuberuntime_manager.go
 *   doBackOff with flowcontrol.Backoff: 10 s, doubling, at most 5 min, forgotten after twice
 *   the maximum without a restart).
 * - A pod that no source lists any more is killed: its containers exit, its sandbox stops.
 *
 * - A container whose program crashes (Crashes: a wrong flag, a broken image) exits as it
 *   starts, and is restarted after its back-off like any other; its pod is never Ready.
 * - The Ready condition is True while every container runs (there are no probes to wait for).
 *
 * - Garbage collection of dead containers and sandboxes (kuberuntime_gc.go), once a
 *   ContainerGCPeriod (a minute) at the kubelet's defaults (MinAge 0, MaxPerPodContainer 1,
 *   MaxContainers unlimited): of each (pod, container) the newest dead container is kept and
 *   older ones removed; every dead container of a pod the kubelet no longer runs is removed once
 *   all its sources were read (the API server answered since it started); then every sandbox
 *   that is not ready and holds no container is removed, but for a pod it still runs, its newest.
 *
 * Left out: init containers, restart policies other than Always, probes, image GC.
 */
import { asArray, isObject, type Json } from "../core/json.ts";
import { type Pod, podId } from "../core/pod.ts";
import { declaredHostPorts, type HostPort } from "../core/ports.ts";
import { type Instant, millisToDuration } from "../core/time.ts";
import type { SimContainerState, SimPod } from "./cri_server.ts";

export interface KubeletTimings {
  /** After the API server answers again, how long until the kubelet has read the services. */
  servicesReadAfterMs: number;
  /** When a sync failed, the next one (the kubelet waits 10 s plus up to 50% jitter). */
  syncRetryMs: number;
  /** The first restart back-off; it doubles with every restart. */
  restartBackoffMs: number;
  maxRestartBackoffMs: number;
}

/** The kubelet's ContainerGCPeriod. */
export const CONTAINER_GC_PERIOD_MS = 60_000;

export const KUBELET_TIMINGS: KubeletTimings = {
  servicesReadAfterMs: 0,
  syncRetryMs: 10_000,
  restartBackoffMs: 10_000,
  maxRestartBackoffMs: 300_000,
};

/** What the kubelet writes into a pod's status when its admission refuses it. */
export const NODE_PORTS_REJECTION = {
  reason: "NodePorts",
  message: "Pod was rejected: Predicate NodePorts failed",
};

export const NODE_AFFINITY_REJECTION = {
  reason: "NodeAffinity",
  message: "Pod was rejected: Predicate NodeAffinity failed",
};

const SERVICES_NOT_READ = {
  reason: "CreateContainerConfigError",
  message: "services have not yet been read at least once, cannot construct envvars",
};

export type KubeletEventKind =
  | "admitted"
  | "rejected"
  | "sandbox-ready"
  | "container-running"
  | "container-exited"
  | "waiting"
  | "killed";

export interface KubeletEvent {
  at: Instant;
  /** namespace/name, as the kubelet names the pod (a static pod with its node suffix). */
  pod: string;
  event: KubeletEventKind;
  container?: string;
  detail?: string;
}

/** What a program listens on: a host port whenever its pod runs on the host network. */
export type ListensOn = (container: Json) => { protocol: string; port: number }[];

/** Whether a container's program exits as soon as it starts (a wrong flag, a broken image). */
export type Crashes = (container: Json) => boolean;

export interface PodSources {
  /** The pods the API server binds to the node; undefined when it cannot be asked. */
  api?: Pod[];
  /** The static pods of the manifest dir, as the kubelet shows them. */
  files: Pod[];
}

interface ContainerRecord {
  name: string;
  attempt: number;
  state: SimContainerState;
  finishedAt?: Instant;
}

interface Sandbox {
  pod: Pod;
  attempt: number;
  ready: boolean;
  containers: ContainerRecord[];
  network: Pick<SimPod, "network" | "portMappings">;
}

interface Waiting {
  reason: string;
  message: string;
}

interface ManagedPod {
  pod: Pod;
  source: "file" | "api";
  /** Refused at admission, or over before the kubelet started: it never runs. */
  terminal?: Waiting;
  /** A failed sync is tried again then, and not before. */
  retryAt?: Instant;
  waiting: Map<string, Waiting>;
}

interface Backoff {
  backoffMs: number;
  lastUpdate: Instant;
}

/** How the kubelet tells pods apart; a pod without a uid (as tests write them) by its id. */
export function uidOf(pod: Pod): string {
  return pod.metadata.uid ?? podId(pod);
}

function containersOf(pod: Pod): Json[] {
  return asArray(isObject(pod.spec) ? pod.spec.containers : undefined);
}

/** Whether the node's labels match every term of the pod's nodeSelector. */
function selectsNode(pod: Pod, labels: Readonly<Record<string, string>>): boolean {
  const selector = isObject(pod.spec) && isObject(pod.spec.nodeSelector)
    ? pod.spec.nodeSelector
    : {};
  return Object.entries(selector).every(([key, value]) => labels[key] === value);
}

function isTerminal(pod: Pod): boolean {
  const phase = isObject(pod.status) ? pod.status.phase : undefined;
  return phase === "Failed" || phase === "Succeeded";
}

/** HostPortInfo.CheckConflict: the same protocol and port, on the same or any address. */
function hostPortsConflict(wanted: HostPort[], used: HostPort[]): boolean {
  const ip = (p: HostPort) => p.hostIP || "0.0.0.0";
  const protocol = (p: HostPort) => p.protocol || "TCP";
  return wanted.some((w) =>
    used.some((u) =>
      protocol(u) === protocol(w) && u.hostPort === w.hostPort &&
      (ip(w) === "0.0.0.0" || ip(u) === "0.0.0.0" || ip(u) === ip(w))
    )
  );
}

/** Whole seconds as Go's time.Duration prints them: 40s, 1m20s, 5m0s. */
function goDuration(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  return seconds < 60 ? `${seconds}s` : `${Math.floor(seconds / 60)}m${seconds % 60}s`;
}

export class KubeletModel {
  readonly events: KubeletEvent[] = [];
  readonly #timings: KubeletTimings;
  readonly #listensOn: ListensOn;
  /** The runtime's sandboxes, oldest first; they outlive the kubelet's memory. */
  readonly #sandboxes: Sandbox[] = [];
  #networks = 0;
  /** What the kubelet knows, in memory: gone at every restart. */
  readonly #pods = new Map<string, ManagedPod>();
  readonly #backoff = new Map<string, Backoff>();
  #apiPods: Pod[] = [];
  #servicesReadAt: Instant | undefined;
  /** The API server answered since the kubelet started: its pods are known (allSourcesReady). */
  #sourcesReady = false;
  /** When the next garbage collection is due; the first a period after the first sync. */
  #collectAt: Instant | undefined;

  readonly #crashes: Crashes;
  readonly #nodeLabels: Readonly<Record<string, string>>;

  constructor(
    timings: KubeletTimings,
    listensOn: ListensOn,
    crashes: Crashes = () => false,
    nodeLabels: Readonly<Record<string, string>> = {},
  ) {
    this.#timings = timings;
    this.#listensOn = listensOn;
    this.#crashes = crashes;
    this.#nodeLabels = nodeLabels;
  }

  /** The node loses power and boots: every process is gone, the kubelet starts afresh. */
  powerCut(now: Instant): void {
    for (const sandbox of this.#sandboxes) this.#stop(sandbox, now);
    this.#pods.clear();
    this.#backoff.clear();
    this.#apiPods = [];
    this.#servicesReadAt = undefined;
    this.#sourcesReady = false;
  }

  /**
   * The kubelet forgets a pod from the API server and kills it (its sandbox stops, its
   * containers exit), as one restarted while the API server is away kills the pods it no longer
   * knows; it runs the pod again once the API server lists it again.
   */
  forget(uid: string, now: Instant): void {
    this.#apiPods = this.#apiPods.filter((pod) => uidOf(pod) !== uid);
    const managed = this.#pods.get(uid);
    if (!managed) return;
    this.#pods.delete(uid);
    this.#kill(managed.pod, now);
  }

  /** One round of the kubelet at `now`: its sources read, every pod that is due synced. */
  sync(now: Instant, sources: PodSources): void {
    if (sources.api) {
      this.#apiPods = sources.api;
      this.#sourcesReady = true;
      this.#servicesReadAt ??= now + millisToDuration(this.#timings.servicesReadAfterMs);
    } else if (this.#servicesReadAt !== undefined && this.#servicesReadAt > now) {
      // The list of services broke off with the API server: it starts again when it is back.
      this.#servicesReadAt = undefined;
    }
    const listed = [
      ...sources.files.map((pod) => ({ pod, source: "file" as const })),
      ...this.#apiPods.map((pod) => ({ pod, source: "api" as const })),
    ];
    const uids = new Set(listed.map(({ pod }) => uidOf(pod)));
    for (const [uid, managed] of this.#pods) {
      if (uids.has(uid)) continue;
      this.#pods.delete(uid);
      this.#kill(managed.pod, now);
    }
    for (const { pod, source } of listed) {
      const managed = this.#pods.get(uidOf(pod));
      if (managed) managed.pod = pod;
      else this.#admit(pod, source, now);
    }
    for (const managed of this.#pods.values()) {
      if (managed.terminal || (managed.retryAt !== undefined && managed.retryAt > now)) continue;
      this.#syncPod(managed, now);
    }
    this.#collectAt ??= now + millisToDuration(CONTAINER_GC_PERIOD_MS);
    if (now >= this.#collectAt) {
      this.#collectGarbage();
      this.#collectAt = now + millisToDuration(CONTAINER_GC_PERIOD_MS);
    }
  }

  /** The container GC, as the top of this file says. */
  #collectGarbage() {
    const newestDead = new Map<string, ContainerRecord>();
    for (const sandbox of this.#sandboxes) {
      for (const container of sandbox.containers) {
        if (container.state !== "exited") continue;
        const key = `${uidOf(sandbox.pod)}/${container.name}`;
        const newest = newestDead.get(key);
        if (!newest || container.finishedAt! >= newest.finishedAt!) newestDead.set(key, container);
      }
    }
    const runs = (sandbox: Sandbox) => this.#pods.has(uidOf(sandbox.pod));
    for (const sandbox of this.#sandboxes) {
      const removesAll = this.#sourcesReady && !runs(sandbox);
      sandbox.containers = sandbox.containers.filter((c) =>
        c.state !== "exited" ||
        (!removesAll && newestDead.get(`${uidOf(sandbox.pod)}/${c.name}`) === c)
      );
    }
    const newestSandbox = new Map<string, Sandbox>();
    for (const sandbox of this.#sandboxes) newestSandbox.set(uidOf(sandbox.pod), sandbox);
    const kept = this.#sandboxes.filter((sandbox) =>
      sandbox.ready || sandbox.containers.length > 0 ||
      (runs(sandbox) && newestSandbox.get(uidOf(sandbox.pod)) === sandbox)
    );
    this.#sandboxes.splice(0, this.#sandboxes.length, ...kept);
  }

  #admit(pod: Pod, source: ManagedPod["source"], now: Instant) {
    const managed: ManagedPod = { pod, source, waiting: new Map() };
    if (isTerminal(pod)) {
      // A pod the API server says is over stays over: a kubelet never runs it again.
      managed.terminal = {
        reason: String((pod.status as Json).reason ?? ""),
        message: String((pod.status as Json).message ?? ""),
      };
    } else {
      const used = [...this.#pods.values()]
        .filter((other) => !other.terminal)
        .flatMap((other) => declaredHostPorts(other.pod, ["containers"]));
      const rejection = !selectsNode(pod, this.#nodeLabels)
        ? NODE_AFFINITY_REJECTION
        : hostPortsConflict(declaredHostPorts(pod, ["containers"]), used)
        ? NODE_PORTS_REJECTION
        : undefined;
      if (rejection) {
        managed.terminal = rejection;
        this.#event(now, pod, "rejected", { detail: rejection.message });
      } else {
        this.#event(now, pod, "admitted");
      }
    }
    this.#pods.set(uidOf(pod), managed);
  }

  #syncPod(managed: ManagedPod, now: Instant) {
    const { pod } = managed;
    let sandbox = this.#latestSandbox(pod);
    if (!sandbox?.ready) {
      sandbox = {
        pod,
        attempt: sandbox ? sandbox.attempt + 1 : 0,
        ready: true,
        containers: [],
        network: this.#network(pod),
      };
      this.#sandboxes.push(sandbox);
      this.#event(now, pod, "sandbox-ready");
    }
    let failed = false;
    const waited = new Map(managed.waiting);
    managed.waiting.clear();
    for (const spec of containersOf(pod)) {
      const name = String(spec.name);
      const current = sandbox.containers.findLast((c) => c.name === name);
      if (current?.state === "running") continue;
      const wait = this.#mustWait(managed, name, current, now);
      if (wait) {
        managed.waiting.set(name, wait);
        if (waited.get(name)?.reason !== wait.reason) {
          this.#event(now, pod, "waiting", { container: name, detail: wait.reason });
        }
        failed = true;
        continue;
      }
      this.#start(sandbox, spec, current, now);
    }
    managed.retryAt = failed ? now + millisToDuration(this.#timings.syncRetryMs) : undefined;
  }

  /** Why a container that does not run is not started now; undefined when it is (again). */
  #mustWait(
    managed: ManagedPod,
    name: string,
    current: ContainerRecord | undefined,
    now: Instant,
  ): Waiting | undefined {
    if (current?.state === "exited") {
      const key = `${uidOf(managed.pod)}/${name}`;
      const delay = this.#backoffLeft(key, current.finishedAt!, now);
      if (delay !== undefined) {
        return {
          reason: "CrashLoopBackOff",
          message: `back-off ${goDuration(delay)} restarting failed container=${name} pod=${
            podId(managed.pod)
          }`,
        };
      }
    }
    const servicesRead = this.#servicesReadAt !== undefined && this.#servicesReadAt <= now;
    if (managed.source === "api" && !servicesRead) return SERVICES_NOT_READ;
    return undefined;
  }

  /**
   * flowcontrol.Backoff as doBackOff uses it: in back-off while less than the current delay has
   * passed since the container finished; otherwise the delay grows for next time (and this
   * restart goes ahead). Returns the delay being waited out, if any.
   */
  #backoffLeft(key: string, finishedAt: Instant, now: Instant): number | undefined {
    const { restartBackoffMs: initial, maxRestartBackoffMs: max } = this.#timings;
    const entry = this.#backoff.get(key);
    const expired = !entry || finishedAt - entry.lastUpdate > millisToDuration(2 * max);
    if (!expired && now - finishedAt < millisToDuration(entry.backoffMs)) return entry.backoffMs;
    this.#backoff.set(key, {
      backoffMs: expired ? initial : Math.min(entry.backoffMs * 2, max),
      lastUpdate: now,
    });
    return undefined;
  }

  #start(sandbox: Sandbox, spec: Json, current: ContainerRecord | undefined, now: Instant) {
    const taken = this.#binds(sandbox.pod, spec).filter((port) => this.#boundPorts().has(port));
    const exit = taken.length > 0
      ? `address already in use: ${taken.join(", ")}`
      : this.#crashes(spec)
      ? "the program exited at once"
      : undefined;
    const container: ContainerRecord = {
      name: String(spec.name),
      attempt: current ? current.attempt + 1 : 0,
      state: exit ? "exited" : "running",
      ...(exit ? { finishedAt: now } : {}),
    };
    sandbox.containers.push(container);
    this.#event(
      now,
      sandbox.pod,
      exit ? "container-exited" : "container-running",
      { container: container.name, ...(exit ? { detail: exit } : {}) },
    );
  }

  /** Host ports the program of a container binds. */
  #binds(pod: Pod, spec: Json): string[] {
    const hostNetwork = isObject(pod.spec) && pod.spec.hostNetwork === true;
    if (!hostNetwork) return [];
    return this.#listensOn(spec).map((p) => `${p.port}/${p.protocol || "TCP"}`);
  }

  #boundPorts(): Set<string> {
    const bound = new Set<string>();
    for (const sandbox of this.#sandboxes) {
      for (const container of sandbox.containers) {
        if (container.state !== "running") continue;
        const spec = containersOf(sandbox.pod).find((c) => c.name === container.name);
        for (const port of spec ? this.#binds(sandbox.pod, spec) : []) bound.add(port);
      }
    }
    return bound;
  }

  #latestSandbox(pod: Pod): Sandbox | undefined {
    return this.#sandboxes.findLast((s) => uidOf(s.pod) === uidOf(pod));
  }

  #kill(pod: Pod, now: Instant) {
    for (const sandbox of this.#sandboxes) {
      if (uidOf(sandbox.pod) === uidOf(pod)) this.#stop(sandbox, now);
    }
    this.#event(now, pod, "killed");
  }

  #stop(sandbox: Sandbox, now: Instant) {
    sandbox.ready = false;
    for (const container of sandbox.containers) {
      if (container.state === "exited") continue;
      container.state = "exited";
      container.finishedAt = now;
    }
  }

  /** A network of its own for a pod off the host network, and the host ports it maps. */
  #network(pod: Pod): Sandbox["network"] {
    if (isObject(pod.spec) && pod.spec.hostNetwork === true) return {};
    const index = this.#networks++;
    const v4 = `10.88.0.${index + 2}`, v6 = `fd00:10:88::${(index + 2).toString(16)}`;
    return {
      network: {
        netnsPath: `/var/run/netns/cni-${uidOf(pod)}`,
        ips: [v4, v6],
        interfaces: [{ name: "eth0", addresses: [`${v4}/16`, `${v6}/64`] }],
      },
      portMappings: declaredHostPorts(pod, ["containers"]).map((p) => ({
        protocol: (p.protocol || "TCP").toLowerCase() as "tcp" | "udp" | "sctp",
        containerPort: p.containerPort,
        hostPort: p.hostPort,
      })),
    };
  }

  #event(
    at: Instant,
    pod: Pod,
    event: KubeletEventKind,
    extra: { container?: string; detail?: string } = {},
  ) {
    this.events.push({ at, pod: podId(pod), event, ...extra });
  }

  /** Whether a pod that `matches` has a running container. */
  runs(matches: (pod: Pod) => boolean): boolean {
    return this.#sandboxes.some((sandbox) =>
      matches(sandbox.pod) && sandbox.containers.some((c) => c.state === "running")
    );
  }

  /** The runtime's view: every sandbox with its containers. */
  runtimePods(): SimPod[] {
    return this.#sandboxes.map((sandbox) => ({
      namespace: sandbox.pod.metadata.namespace,
      name: sandbox.pod.metadata.name,
      uid: uidOf(sandbox.pod),
      attempt: sandbox.attempt,
      ready: sandbox.ready,
      containers: sandbox.containers.map(({ name, attempt, state }) => ({ name, attempt, state })),
      ...sandbox.network,
    }));
  }

  /** The pods from the API server the kubelet knows, with the status it reports for them. */
  apiPods(): Pod[] {
    return this.#apiPods.map((pod) => {
      const managed = this.#pods.get(uidOf(pod));
      return managed ? { ...pod, status: this.#status(managed) } : pod;
    });
  }

  /** The status the kubelet reports, as its status manager writes it. */
  #status(managed: ManagedPod): Json {
    if (managed.terminal) return { phase: "Failed", ...managed.terminal };
    const sandbox = this.#latestSandbox(managed.pod);
    const containerStatuses = containersOf(managed.pod).map((spec) => {
      const name = String(spec.name);
      const current = sandbox?.containers.findLast((c) => c.name === name);
      const waiting = managed.waiting.get(name);
      const state = current?.state === "running"
        ? { running: {} }
        : waiting
        ? { waiting }
        : current
        ? { terminated: { exitCode: 1, reason: "Error" } }
        : { waiting: { reason: "ContainerCreating" } };
      return {
        name,
        ready: current?.state === "running",
        restartCount: current?.attempt ?? 0,
        state,
      };
    });
    // Pending until every container was made once; Running after, restarts included.
    const made = containersOf(managed.pod).every((spec) =>
      sandbox?.containers.some((c) => c.name === String(spec.name))
    );
    // Ready as the status manager computes it without probes: every container running.
    const ready = containerStatuses.length > 0 && containerStatuses.every((c) => c.ready);
    return {
      phase: sandbox?.ready && made ? "Running" : "Pending",
      conditions: [{ type: "Ready", status: ready ? "True" : "False" }],
      containerStatuses,
    };
  }
}
