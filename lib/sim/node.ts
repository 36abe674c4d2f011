/**
 * A simulated control-plane node: an API server, a kubelet and a container runtime on loopback
 * (real TLS, real gRPC), a temp directory tree laid out like /etc/kubernetes and
 * /var/lib/ckpt-agent, and a small model of what the kubelet does — run the pods bound to the node
 * while the control plane is up, and run whatever manifests sit in the static-pod dir.
 *
 * The demo (`ckpt-agent demo`), the end-to-end tests and the benchmarks run the real agent
 * against it; nothing here is a test double of the agent itself.
 */
import { join } from "node:path";
import { stringify as toYaml } from "yaml";
import type { Config } from "../config/types.ts";
import { configAsYamlSettings } from "../config/load.ts";
import { type Pod, podId } from "../core/pod.ts";
import { readManifestDir } from "../disk/manifests.ts";
import { type SimApiServer, startSimApiServer } from "./apiserver.ts";
import { type ControlPlane, controlPlane } from "./control_plane.ts";
import { CriSimServer, type SimPod } from "./cri_server.ts";
import { type SimKubelet, startSimKubelet, staticPodAsKubeletShowsIt } from "./kubelet.ts";
import { createSimCa, writeKubeconfig } from "./pki.ts";

/** How the API server is unavailable: its pod is gone (nothing listens), or etcd is (503). */
export type ApiOutage = "down" | "etcd-gone";

export interface SimNodeOptions {
  nodeName?: string;
  /** The cluster's pods and objects; default: a realistic control plane for this node. */
  cluster?: ControlPlane;
  /** Also serve the kubelet's read-only port. */
  kubeletReadonlyPort?: boolean;
}

function ownNetwork(index: number, pod: Pod): Pick<SimPod, "network" | "portMappings"> {
  const spec = pod.spec as { hostNetwork?: boolean; containers?: { ports?: unknown[] }[] };
  if (spec.hostNetwork) return {};
  const ports = (spec.containers ?? []).flatMap((c) => c.ports ?? []) as {
    containerPort: number;
    hostPort?: number;
    protocol?: string;
  }[];
  const v4 = `10.88.0.${index + 2}`, v6 = `fd00:10:88::${(index + 2).toString(16)}`;
  return {
    network: {
      netnsPath: `/var/run/netns/cni-${pod.metadata.uid ?? index}`,
      ips: [v4, v6],
      interfaces: [{ name: "eth0", addresses: [`${v4}/16`, `${v6}/64`] }],
    },
    portMappings: ports.filter((p) => p.hostPort).map((p) => ({
      protocol: (p.protocol ?? "TCP").toLowerCase() as "tcp" | "udp" | "sctp",
      containerPort: p.containerPort,
      hostPort: p.hostPort!,
    })),
  };
}

export class SimNode {
  readonly root: string;
  readonly nodeName: string;
  readonly apiServer: SimApiServer;
  readonly kubelet: SimKubelet;
  readonly kubeconfig: string;
  readonly kubeletCaFile: string;
  #runtime: CriSimServer | undefined;
  readonly #socketPath: string;
  readonly #parents = new Map<string, Pod>();
  /** Parents whose containers the kubelet runs right now. */
  readonly #running = new Set<string>();

  private constructor(init: {
    root: string;
    nodeName: string;
    apiServer: SimApiServer;
    kubelet: SimKubelet;
    runtime: CriSimServer;
    socketPath: string;
    kubeconfig: string;
    kubeletCaFile: string;
  }) {
    this.root = init.root;
    this.nodeName = init.nodeName;
    this.apiServer = init.apiServer;
    this.kubelet = init.kubelet;
    this.#runtime = init.runtime;
    this.#socketPath = init.socketPath;
    this.kubeconfig = init.kubeconfig;
    this.kubeletCaFile = init.kubeletCaFile;
  }

  static async start(options: SimNodeOptions = {}): Promise<SimNode> {
    const nodeName = options.nodeName ?? "cp-1";
    const root = await Deno.makeTempDir({ prefix: "ckpt-sim-node-" });
    try {
      for (const dir of ["etc/kubernetes/manifests", "etc/ckpt-agent", "run/lock"]) {
        await Deno.mkdir(join(root, dir), { recursive: true });
      }
      const ca = await createSimCa();
      const apiServer = await startSimApiServer(ca);
      const kubelet = await startSimKubelet({
        nodeName,
        clientCaPem: ca.certPem,
        readonlyPort: options.kubeletReadonlyPort,
      });
      const socketPath = join(root, "run/containerd.sock");
      const runtime = await CriSimServer.start({ socketPath });
      const client = await ca.issueClientCert({
        commonName: `system:node:${nodeName}`,
        organizations: ["system:nodes"],
      });
      const kubeconfig = await writeKubeconfig(join(root, "etc/kubernetes"), {
        server: apiServer.url,
        caPem: ca.certPem,
        client,
        embed: "files",
      });
      const kubeletCaFile = join(root, "etc/kubernetes/kubelet-ca.crt");
      await Deno.writeTextFile(kubeletCaFile, kubelet.servingCertPem);
      const node = new SimNode({
        root,
        nodeName,
        apiServer,
        kubelet,
        runtime,
        socketPath,
        kubeconfig,
        kubeletCaFile,
      });
      await node.#install(options.cluster ?? controlPlane(nodeName));
      return node;
    } catch (e) {
      await Deno.remove(root, { recursive: true }).catch(() => {});
      throw e;
    }
  }

  async #install(cluster: ControlPlane) {
    for (const pod of cluster.pods) {
      this.#parents.set(podId(pod), pod);
      this.#running.add(podId(pod));
    }
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
      kubeconfig: this.kubeconfig,
      lockFile: at("run/lock/ckpt-agent.lock"),
      containerRuntimeEndpoint: `unix://${this.#socketPath}`,
      runtimeRequestTimeoutMs: 5_000,
      apiTimeoutMs: 10_000,
      kubeletTimeoutMs: 5_000,
      checkpointGracePeriodMs: 60_000,
      nodeName: this.nodeName,
      kubeletUrl: this.kubelet.url,
      ...(this.kubelet.readonlyUrl ? { kubeletReadonlyUrl: this.kubelet.readonlyUrl } : {}),
      kubeletCaFile: this.kubeletCaFile,
      staticPodDir: at("etc/kubernetes/manifests"),
      inactiveDir: at("etc/kubernetes/inactive-manifests"),
      secretsDir: at("etc/kubernetes/checkpoint-secrets"),
      configmapsDir: at("etc/kubernetes/checkpoint-configmaps"),
      stateDir: at("var/lib/ckpt-agent"),
      pollIntervalMs: 1_000,
      refreshIntervalMs: 60_000,
      namespaces: [],
      adminListen: "off",
      adminAllowRemote: false,
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

  get parents(): Pod[] {
    return [...this.#parents.values()];
  }

  /** Power cut or crash: every pod stops, and the API server with them. */
  async loseControlPlane(how: ApiOutage = "down") {
    this.#running.clear();
    if (how === "down") await this.apiServer.stopListening();
    else this.apiServer.setFault("server-error");
    // Without the API server the kubelet cannot authorize requests to its secure port.
    this.kubelet.secure.setFault("forbidden");
    await this.sync();
  }

  /** The API server answers again, and the kubelet starts the pods bound to the node. */
  async restoreControlPlane() {
    await this.apiServer.resumeListening();
    this.apiServer.setFault("none");
    this.kubelet.secure.setFault("none");
    for (const id of this.#parents.keys()) this.#running.add(id);
    await this.sync();
  }

  /** `kubectl delete pod`: gone from the API server and stopped by the kubelet. */
  async deleteParent(id: string) {
    this.#parents.delete(id);
    this.#running.delete(id);
    await this.sync();
  }

  async setParentRunning(id: string, running: boolean) {
    if (running) this.#running.add(id);
    else this.#running.delete(id);
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

  /**
   * What the kubelet would do now: run every manifest in the static-pod dir (as `<name>-<node>`)
   * and the bound pods it was told to run, and list them on its `/pods` endpoint.
   */
  async sync() {
    const statics = (await readManifestDir(this.config().staticPodDir)).pods;
    this.kubelet.setStaticPods(statics);
    const parents = [...this.#parents.values()];
    this.kubelet.setPods(parents);
    this.apiServer.setPods(parents);
    const running = [
      ...parents.filter((p) => this.#running.has(podId(p))),
      ...statics.map((m) => staticPodAsKubeletShowsIt(m, this.nodeName)),
    ];
    this.#runtime?.setPods(running.map((pod, index) => ({
      namespace: pod.metadata.namespace,
      name: pod.metadata.name,
      uid: pod.metadata.uid ?? `uid-${index}`,
      ready: true,
      containers: [{ name: "main", running: true }],
      ...ownNetwork(index, pod),
    })));
  }

  async close() {
    await this.#runtime?.close();
    await this.kubelet.close();
    await this.apiServer.close();
    await Deno.remove(this.root, { recursive: true }).catch(() => {});
  }
}
