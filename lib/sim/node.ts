/**
 * A simulated control-plane node: an API server, a kubelet and a container runtime on loopback
 * (real TLS, real gRPC), a temp directory tree laid out like /etc/kubernetes and
 * /var/lib/ckpt-agent, and a model of what the kubelet does with pods (lib/sim/kubelet_model.ts):
 * it runs the pods the API server binds to the node and the manifests in the static-pod dir,
 * admits, starts, restarts and kills them as a real kubelet does, on the node's own clock.
 *
 * The demo (`ckpt-agent demo`), the end-to-end tests and the benchmarks run the real agent
 * against it; nothing here is a test double of the agent itself.
 */
import { join } from "node:path";
import { stringify as toYaml } from "yaml";
import type { Config } from "../config/types.ts";
import { configAsYamlSettings, defaultConfig } from "../config/load.ts";
import { asArray, type Json } from "../core/json.ts";
import { type Pod, podId } from "../core/pod.ts";
import { type SimApiServer, type SimApiServerOptions, startSimApiServer } from "./apiserver.ts";
import { SimClock } from "./clock.ts";
import { type ControlPlane, controlPlane } from "./control_plane.ts";
import { CriSimServer } from "./cri_server.ts";
import { type SimKubelet, startSimKubelet, staticPodAsKubeletShowsIt } from "./kubelet.ts";
import {
  KUBELET_TIMINGS,
  type KubeletEvent,
  KubeletModel,
  type KubeletTimings,
  type ListensOn,
  uidOf,
} from "./kubelet_model.ts";
import { createSimCa, type SimCa, type Validity, writeKubeconfig } from "./pki.ts";
import { readStaticPodDir } from "./static_pods.ts";

/** How the API server is unavailable: its pod is gone (nothing listens), or etcd is (503). */
export type ApiOutage = "down" | "etcd-gone";

export interface SimNodeOptions {
  nodeName?: string;
  /** The cluster's pods and objects; default: a realistic control plane for this node. */
  cluster?: ControlPlane;
  /** Also serve the kubelet's read-only port. */
  kubeletReadonlyPort?: boolean;
  /** The kubelet's serving certificate signed by the cluster's CA; default: self-signed. */
  kubeletServingByClusterCa?: boolean;
  /** The kubelet's delays; default KUBELET_TIMINGS (no wait for services). */
  kubelet?: Partial<KubeletTimings>;
  /**
   * A self-hosted control plane: the API server answers only while a pod with these labels (the
   * API server's parent, or its copy) runs. Unset, it answers whenever the control plane is up.
   */
  apiServerLabels?: Record<string, string>;
  /** How the API server serves (HTTP/2, bookmarks, the events it keeps). */
  apiServer?: SimApiServerOptions;
}

/** The kubelet acts at least this often while time passes: its pod lifecycle relist period. */
const RELIST_MS = 1_000;

/**
 * What each program listens on, learned from the ports the cluster's pods declare for it: a
 * copy runs the same image as its parent, and binds the same ports whatever it declares.
 */
function programPorts(cluster: ControlPlane): ListensOn {
  const byImage = new Map<string, { protocol: string; port: number }[]>();
  for (const pod of [...cluster.pods, ...cluster.staticManifests]) {
    const spec = (pod.spec ?? {}) as Json;
    for (const container of asArray(spec.containers)) {
      const ports = asArray(container.ports).map((p) => ({
        protocol: typeof p.protocol === "string" ? p.protocol : "TCP",
        port: Number(p.containerPort),
      }));
      if (ports.length > 0) byImage.set(String(container.image), ports);
    }
  }
  return (container) => byImage.get(String(container.image)) ?? [];
}

/** The labels a control-plane node carries, which a pod's nodeSelector is matched against. */
function nodeLabels(nodeName: string): Record<string, string> {
  return {
    "kubernetes.io/hostname": nodeName,
    "kubernetes.io/os": "linux",
    "node-role.kubernetes.io/control-plane": "",
  };
}

/** The node's kubeconfig, with a client certificate the cluster's CA issues now. */
async function writeNodeKubeconfig(
  root: string,
  nodeName: string,
  apiServer: SimApiServer,
  ca: SimCa,
  validity?: Validity,
): Promise<string> {
  const client = await ca.issueClientCert({
    commonName: `system:node:${nodeName}`,
    organizations: ["system:nodes"],
  }, validity);
  return await writeKubeconfig(join(root, "etc/kubernetes"), {
    server: apiServer.url,
    caPem: ca.certPem,
    client,
    embed: "files",
  });
}

export class SimNode {
  readonly root: string;
  readonly nodeName: string;
  readonly apiServer: SimApiServer;
  readonly kubelet: SimKubelet;
  readonly kubeconfig: string;
  readonly kubeletCaFile: string;
  /** The cluster's CA, which signs the API server's certificate and the node's. */
  readonly ca: SimCa;
  /** The node's time: the kubelet's back-offs and waits run on it, and on nothing else. */
  readonly clock = new SimClock();
  #runtime: CriSimServer | undefined;
  readonly #socketPath: string;
  readonly #model: KubeletModel;
  readonly #parents = new Map<string, Pod>();
  /** The status of each parent as the kubelet last reported it to the API server. */
  readonly #reported = new Map<string, Json>();
  #api: "up" | ApiOutage = "up";
  readonly #apiServerLabels: Record<string, string> | undefined;
  /** Until the node has started, its control plane runs, however it is hosted. */
  #settled = false;
  /** Per static-pod file the kubelet could not use, what it last said about it. */
  readonly #fileProblems = new Map<string, string>();
  readonly #kubeletLog: string[] = [];
  /** Images whose program exits as soon as it starts (breakImage). */
  readonly #brokenImages: Set<string>;
  #rollouts = 0;

  private constructor(init: {
    root: string;
    nodeName: string;
    apiServer: SimApiServer;
    kubelet: SimKubelet;
    runtime: CriSimServer;
    socketPath: string;
    kubeconfig: string;
    kubeletCaFile: string;
    ca: SimCa;
    model: KubeletModel;
    apiServerLabels?: Record<string, string>;
    brokenImages: Set<string>;
  }) {
    this.root = init.root;
    this.nodeName = init.nodeName;
    this.apiServer = init.apiServer;
    this.kubelet = init.kubelet;
    this.#runtime = init.runtime;
    this.#socketPath = init.socketPath;
    this.kubeconfig = init.kubeconfig;
    this.kubeletCaFile = init.kubeletCaFile;
    this.ca = init.ca;
    this.#model = init.model;
    this.#apiServerLabels = init.apiServerLabels;
    this.#brokenImages = init.brokenImages;
  }

  static async start(options: SimNodeOptions = {}): Promise<SimNode> {
    const nodeName = options.nodeName ?? "cp-1";
    const cluster = options.cluster ?? controlPlane(nodeName);
    const timings = { ...KUBELET_TIMINGS, ...options.kubelet };
    const root = await Deno.makeTempDir({ prefix: "ckpt-sim-node-" });
    try {
      for (const dir of ["etc/kubernetes/manifests", "etc/ckpt-agent", "run/lock"]) {
        await Deno.mkdir(join(root, dir), { recursive: true });
      }
      const ca = await createSimCa();
      const apiServer = await startSimApiServer(ca, options.apiServer);
      const kubelet = await startSimKubelet({
        nodeName,
        clientCaPem: ca.certPem,
        readonlyPort: options.kubeletReadonlyPort,
        ...(options.kubeletServingByClusterCa ? { servingCa: ca } : {}),
      });
      const socketPath = join(root, "run/containerd.sock");
      const runtime = await CriSimServer.start({ socketPath });
      const kubeconfig = await writeNodeKubeconfig(root, nodeName, apiServer, ca);
      const kubeletCaFile = join(root, "etc/kubernetes/kubelet-ca.crt");
      await Deno.writeTextFile(kubeletCaFile, kubelet.servingCertPem);
      const brokenImages = new Set<string>();
      const node = new SimNode({
        root,
        nodeName,
        apiServer,
        kubelet,
        runtime,
        socketPath,
        kubeconfig,
        kubeletCaFile,
        ca,
        model: new KubeletModel(
          timings,
          programPorts(cluster),
          (container) => brokenImages.has(String(container.image)),
          nodeLabels(nodeName),
        ),
        apiServerLabels: options.apiServerLabels,
        brokenImages,
      });
      await node.#install(cluster);
      // The node has been up a while: every pod runs, whatever the kubelet first waited for.
      await node.advance(
        Math.ceil(timings.servicesReadAfterMs / timings.syncRetryMs) * timings.syncRetryMs,
      );
      node.#settled = true;
      return node;
    } catch (e) {
      await Deno.remove(root, { recursive: true }).catch(() => {});
      throw e;
    }
  }

  async #install(cluster: ControlPlane) {
    for (const pod of cluster.pods) this.#parents.set(podId(pod), pod);
    for (const s of cluster.secrets) this.apiServer.setSecret(s.namespace, s.name, s.data);
    for (const c of cluster.configMaps) this.apiServer.setConfigMap(c.namespace, c.name, c.data);
    for (const manifest of cluster.staticManifests) {
      const file = join(this.config().staticPodDir, `${manifest.metadata.name}.yaml`);
      await Deno.writeTextFile(file, toYaml(manifest));
    }
    await this.sync();
  }

  /** The agent's configuration for this node. */
  config(overrides: Partial<Config> = {}): Config {
    const at = (path: string) => join(this.root, path);
    return {
      ...defaultConfig(this.nodeName),
      kubeconfig: this.kubeconfig,
      lockFile: at("run/lock/ckpt-agent.lock"),
      containerRuntimeEndpoint: `unix://${this.#socketPath}`,
      runtimeRequestTimeoutMs: 5_000,
      kubeletUrl: this.kubelet.url,
      ...(this.kubelet.readonlyUrl ? { kubeletReadonlyUrl: this.kubelet.readonlyUrl } : {}),
      kubeletCaFile: this.kubeletCaFile,
      staticPodDir: at("etc/kubernetes/manifests"),
      inactiveDir: at("etc/kubernetes/inactive-manifests"),
      secretsDir: at("etc/kubernetes/checkpoint-secrets"),
      configmapsDir: at("etc/kubernetes/checkpoint-configmaps"),
      stateDir: at("var/lib/ckpt-agent"),
      pollIntervalMs: 1_000,
      adminListen: "off",
      adminTokenFile: at("etc/ckpt-agent/admin-token"),
      ...overrides,
    };
  }

  /** Writes the configuration as a YAML file for `ckpt-agent --config`; returns its path. */
  async writeConfigFile(overrides: Partial<Config> = {}): Promise<string> {
    const file = join(this.root, "etc/ckpt-agent/config.yaml");
    await Deno.writeTextFile(file, toYaml(configAsYamlSettings(this.config(overrides))));
    return file;
  }

  /**
   * The node gets a new client certificate, valid as `validity` says (an expired one, one about
   * to expire), written over the old one as the kubelet rotates its own.
   */
  async rotateClientCert(validity: Validity) {
    await writeNodeKubeconfig(this.root, this.nodeName, this.apiServer, this.ca, validity);
  }

  /** The pods of the cluster as the API server stores them, status included. */
  get parents(): Pod[] {
    return [...this.#parents.values()].map((pod) => {
      const status = this.#reported.get(uidOf(pod));
      return status ? { ...pod, status } : pod;
    });
  }

  /** What the kubelet did, oldest first. */
  get events(): readonly KubeletEvent[] {
    return this.#model.events;
  }

  /**
   * What the kubelet logged about the static-pod dir: each manifest it could not use, said
   * when the problem appears or changes (lib/sim/static_pods.ts).
   */
  get kubeletLog(): readonly string[] {
    return this.#kubeletLog;
  }

  /** Power cut or crash: every pod stops, and the API server with them; the node boots. */
  async loseControlPlane(how: ApiOutage = "down") {
    this.#model.powerCut(this.clock.now());
    await this.loseApiServer(how);
  }

  /** The API server alone is gone (its process, or etcd); every pod on the node runs on. */
  async loseApiServer(how: ApiOutage = "down") {
    this.#api = how;
    // The port closes and every connection is cut at once; the server's own teardown (a
    // second or more with thousands of watches) is waited for only once the runtime and the
    // kubelet show what the cut left: a power cut stops the pods as it stops the API server,
    // and the runtime does not wait for this process to finish closing its server.
    const stopped = how === "down" ? this.apiServer.stopListening() : undefined;
    if (how !== "down") this.apiServer.setFault("server-error");
    // Without the API server the kubelet cannot authorize requests to its secure port.
    this.kubelet.secure.setFault("forbidden");
    await this.sync();
    await stopped;
  }

  /** The API server answers again: the kubelet lists the pods bound to the node and runs them. */
  async restoreControlPlane() {
    this.apiServer.setFault("none");
    this.kubelet.secure.setFault("none");
    this.#api = "up";
    await this.sync();
  }

  /**
   * A new spec for a parent, as a controller that keeps pod names rolls it out: the pod is
   * replaced by one of the same name with `change` applied and a new uid; the kubelet kills
   * the old pod and starts the new one. Returns the new pod.
   */
  async updateParent(id: string, change: (pod: Pod) => Pod): Promise<Pod> {
    const old = this.#parentOf(id);
    const changed = change(structuredClone(old));
    const uid = `${uidOf(old).slice(0, 24)}${String(++this.#rollouts).padStart(12, "0")}`;
    const pod: Pod = { ...changed, metadata: { ...changed.metadata, uid } };
    delete pod.status;
    this.#parents.set(id, pod);
    await this.sync();
    return pod;
  }

  /**
   * A new spec for a parent, as a DaemonSet rolls it out: the pod is deleted and its controller
   * creates one of a new name (its `generateName` and a new suffix) and a new uid, with the same
   * controller ownerReference and `change` applied; the kubelet kills the old pod and starts the
   * new one. Returns the new pod.
   */
  async replaceParent(id: string, change: (pod: Pod) => Pod): Promise<Pod> {
    const old = this.#parentOf(id);
    const changed = change(structuredClone(old));
    const rollout = String(++this.#rollouts);
    const { generateName } = old.metadata;
    const prefix = typeof generateName === "string" ? generateName : `${old.metadata.name}-`;
    const name = `${prefix}r${rollout.padStart(4, "0")}`;
    const uid = `${uidOf(old).slice(0, 24)}${rollout.padStart(12, "0")}`;
    const pod: Pod = { ...changed, metadata: { ...changed.metadata, name, uid } };
    delete pod.status;
    this.#parents.delete(id);
    this.#parents.set(podId(pod), pod);
    await this.sync();
    return pod;
  }

  /** From now on, a container of this image exits as soon as it starts (a broken image). */
  breakImage(image: string) {
    this.#brokenImages.add(image);
  }

  /**
   * A parent's pod stops while the API server is away: the kubelet kills it (its sandbox stops,
   * its containers exit) and runs it again only once the API server lists it again
   * (KubeletModel.forget).
   */
  async stopParent(id: string) {
    this.#model.forget(uidOf(this.#parentOf(id)), this.clock.now());
    await this.sync();
  }

  #parentOf(id: string): Pod {
    const pod = this.#parents.get(id);
    if (!pod) throw new Error(`no parent ${id}`);
    return pod;
  }

  /** `kubectl delete pod`: gone from the API server and stopped by the kubelet. */
  async deleteParent(id: string) {
    this.#parents.delete(id);
    await this.sync();
  }

  /** The container runtime stops answering (crashed, restarting, socket gone). */
  async stopRuntime() {
    await this.#runtime?.close();
    this.#runtime = undefined;
  }

  async startRuntime() {
    if (this.#runtime) return;
    this.#runtime = await CriSimServer.start({ socketPath: this.#socketPath });
    await this.sync();
  }

  /** Time passes on the node; the kubelet acts along the way, at least once a second. */
  async advance(ms: number) {
    for (let left = ms; left > 0; left -= RELIST_MS) {
      this.clock.advance(Math.min(left, RELIST_MS));
      await this.sync();
    }
  }

  /**
   * What the kubelet does now: read its sources (the static-pod dir, and the API server when it
   * answers), admit, start, restart and kill pods, and report their status to the API server.
   */
  async sync() {
    const files = readStaticPodDir(this.config().staticPodDir, this.nodeName);
    this.#logFileProblems(files.log);
    const manifests = files.pods;
    const api = this.#apiServing() ? this.parents : undefined;
    this.#model.sync(this.clock.now(), {
      api,
      files: manifests.map((m) => staticPodAsKubeletShowsIt(m, this.nodeName)),
    });
    if (this.#api === "up") {
      if (this.#apiServing()) await this.apiServer.resumeListening();
      else await this.apiServer.stopListening();
    }
    const known = this.#model.apiPods();
    if (api) {
      for (const pod of known) if (pod.status) this.#reported.set(uidOf(pod), pod.status);
    }
    this.kubelet.setStaticPods(manifests);
    this.kubelet.setPods(known);
    this.apiServer.setPods(this.parents);
    this.#runtime?.setPods(this.#model.runtimePods());
  }

  /** Each problem once while it lasts, as a kubelet's log shows it on every re-read. */
  #logFileProblems(log: { path: string; line: string }[]) {
    for (const { path, line } of log) {
      if (this.#fileProblems.get(path) !== line) this.#kubeletLog.push(line);
    }
    this.#fileProblems.clear();
    for (const { path, line } of log) this.#fileProblems.set(path, line);
  }

  #apiServing(): boolean {
    const labels = this.#apiServerLabels;
    if (this.#api !== "up") return false;
    if (!labels || !this.#settled) return true;
    return this.#model.runs((pod) =>
      Object.entries(labels).every(([key, value]) => pod.metadata.labels?.[key] === value)
    );
  }

  async close() {
    await this.#runtime?.close();
    await this.kubelet.close();
    await this.apiServer.close();
    await Deno.remove(this.root, { recursive: true }).catch(() => {});
  }
}
