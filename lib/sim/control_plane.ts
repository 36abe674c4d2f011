/**
 * A realistic self-hosted control plane for the simulated node: the pods a bootkube-style
 * cluster runs as DaemonSets (annotated for checkpointing), with the secrets and configmaps they
 * mount, plus pods that must never be checkpointed (a Deployment pod and a static etcd).
 */
import { CHECKPOINT_ANNOTATION, type Pod } from "../core/pod.ts";

export interface SimObject {
  namespace: string;
  name: string;
  data: Record<string, string>;
}

export interface ControlPlane {
  /** Pods the API server binds to the node; parents and non-parents alike. */
  pods: Pod[];
  secrets: SimObject[];
  configMaps: SimObject[];
  /** Manifests an installer put in the kubelet's static-pod dir: never ours to touch. */
  staticManifests: Pod[];
}

const NS = "kube-system";

function fakePem(kind: string, seed: string): string {
  const body = btoa(`${kind}:${seed}:`.repeat(12)).replace(/(.{64})/g, "$1\n");
  return `-----BEGIN ${kind}-----\n${body}\n-----END ${kind}-----\n`;
}

/**
 * A stable uid of its own for every name: each of the 16 bytes folds in every byte of the name
 * (FNV-1a), so names alike in their first bytes (`ds-component-0031`, `ds-component-0032`) still
 * get uids of their own, as distinct objects in a cluster do.
 */
function uid(name: string): string {
  const bytes = new TextEncoder().encode(name);
  let hex = "";
  for (let part = 0; part < 4; part++) {
    let h = (0x811c9dc5 ^ part) >>> 0;
    for (const b of bytes) h = Math.imul(h ^ b, 0x01000193) >>> 0;
    hex += h.toString(16).padStart(8, "0");
  }
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${
    hex.slice(20, 32)
  }`;
}

function apiAccessVolume(suffix: string) {
  return {
    name: `kube-api-access-${suffix}`,
    projected: {
      defaultMode: 420,
      sources: [
        { serviceAccountToken: { expirationSeconds: 3607, path: "token" } },
        { configMap: { name: "kube-root-ca.crt", items: [{ key: "ca.crt", path: "ca.crt" }] } },
        {
          downwardAPI: {
            items: [{
              path: "namespace",
              fieldRef: { apiVersion: "v1", fieldPath: "metadata.namespace" },
            }],
          },
        },
      ],
    },
  };
}

interface DaemonPodSpec {
  app: string;
  /** Default kube-system. */
  namespace?: string;
  suffix: string;
  nodeName: string;
  command: string[];
  secret?: string;
  /** More secret volumes, each with every key of its secret, mounted read-only. */
  secrets?: { name: string; mountPath: string }[];
  configMap?: { name: string; key: string; mountPath: string };
  checkpoint?: boolean;
  /** Default true, as most control-plane pods; false gives the pod a network of its own. */
  hostNetwork?: boolean;
  /** The port the component serves on, named `https`; its liveness probe asks it by name. */
  https?: { port: number; path: string; hostPort?: number };
}

/** A pod as the API server returns it for a DaemonSet-managed control-plane component. */
export function daemonSetPod(spec: DaemonPodSpec): Pod {
  const name = `${spec.app}-${spec.suffix}`;
  const volumes: unknown[] = [];
  const mounts: unknown[] = [];
  if (spec.secret) {
    volumes.push({ name: "secrets", secret: { secretName: spec.secret, defaultMode: 420 } });
    mounts.push({ name: "secrets", mountPath: "/etc/kubernetes/secrets", readOnly: true });
  }
  for (const { name, mountPath } of spec.secrets ?? []) {
    volumes.push({ name, secret: { secretName: name, defaultMode: 384 } });
    mounts.push({ name, mountPath, readOnly: true });
  }
  if (spec.configMap) {
    volumes.push({
      name: "config",
      configMap: {
        name: spec.configMap.name,
        items: [{ key: spec.configMap.key, path: spec.configMap.key }],
      },
    });
    mounts.push({ name: "config", mountPath: spec.configMap.mountPath, readOnly: true });
  }
  volumes.push({ name: "ssl-certs-host", hostPath: { path: "/etc/ssl/certs", type: "" } });
  mounts.push({ name: "ssl-certs-host", mountPath: "/etc/ssl/certs", readOnly: true });
  const access = apiAccessVolume(spec.suffix.slice(0, 5));
  volumes.push(access);
  mounts.push({
    name: access.name,
    mountPath: "/var/run/secrets/kubernetes.io/serviceaccount",
    readOnly: true,
  });
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      generateName: `${spec.app}-`,
      namespace: spec.namespace ?? NS,
      uid: uid(name),
      resourceVersion: "184467",
      creationTimestamp: "2026-11-02T08:14:33Z",
      labels: { "k8s-app": spec.app, tier: "control-plane", "pod-template-generation": "1" },
      annotations: spec.checkpoint === false ? {} : { [CHECKPOINT_ANNOTATION]: "true" },
      ownerReferences: [{
        apiVersion: "apps/v1",
        kind: "DaemonSet",
        name: spec.app,
        uid: uid(`ds-${spec.app}`),
        controller: true,
        blockOwnerDeletion: true,
      }],
    },
    spec: {
      nodeName: spec.nodeName,
      hostNetwork: spec.hostNetwork ?? true,
      serviceAccountName: spec.app,
      serviceAccount: spec.app,
      nodeSelector: { "node-role.kubernetes.io/control-plane": "" },
      priorityClassName: "system-cluster-critical",
      securityContext: { runAsNonRoot: true, runAsUser: 65534, fsGroup: 65534 },
      tolerations: [{ key: "node-role.kubernetes.io/control-plane", operator: "Exists" }],
      containers: [{
        name: spec.app,
        image: `registry.k8s.io/${spec.app}:v1.34.2`,
        command: spec.command,
        ...(spec.https
          ? {
            ports: [{
              name: "https",
              containerPort: spec.https.port,
              ...(spec.https.hostPort ? { hostPort: spec.https.hostPort } : {}),
              protocol: "TCP",
            }],
            livenessProbe: {
              httpGet: { path: spec.https.path, port: "https", scheme: "HTTPS" },
              initialDelaySeconds: 10,
              periodSeconds: 10,
              failureThreshold: 8,
            },
          }
          : {}),
        volumeMounts: mounts,
      }],
      volumes,
    },
    status: { phase: "Running", hostIP: "10.0.0.11", podIP: "10.0.0.11" },
  };
}

/** The control plane of one node: what `ckpt-agent demo` and the end-to-end tests run. */
export function controlPlane(nodeName: string): ControlPlane {
  const pods = [
    daemonSetPod({
      app: "kube-apiserver",
      suffix: "7x2kq",
      nodeName,
      secret: "kube-apiserver",
      configMap: {
        name: "apiserver-audit",
        key: "policy.yaml",
        mountPath: "/etc/kubernetes/audit",
      },
      // On the host network every declared port is a host port: 6443 on the node.
      https: { port: 6443, path: "/livez" },
      command: [
        "kube-apiserver",
        "--secure-port=6443",
        "--etcd-servers=https://127.0.0.1:2379",
        "--tls-cert-file=/etc/kubernetes/secrets/apiserver.crt",
        "--tls-private-key-file=/etc/kubernetes/secrets/apiserver.key",
        "--audit-policy-file=/etc/kubernetes/audit/policy.yaml",
      ],
    }),
    daemonSetPod({
      app: "kube-controller-manager",
      suffix: "m4t9z",
      nodeName,
      secret: "kube-controller-manager",
      https: { port: 10257, path: "/healthz" },
      command: [
        "kube-controller-manager",
        "--service-account-private-key-file=/etc/kubernetes/secrets/service-account.key",
        "--root-ca-file=/etc/kubernetes/secrets/ca.crt",
      ],
    }),
    daemonSetPod({
      app: "kube-scheduler",
      suffix: "q8w2c",
      nodeName,
      configMap: {
        name: "scheduler-config",
        key: "config.yaml",
        mountPath: "/etc/kubernetes/scheduler",
      },
      hostNetwork: false,
      https: { port: 10259, hostPort: 10259, path: "/healthz" },
      command: ["kube-scheduler", "--config=/etc/kubernetes/scheduler/config.yaml"],
    }),
    // Scheduled here too, but not asking to be checkpointed.
    daemonSetPod({
      app: "coredns",
      suffix: "5d8f7",
      nodeName,
      checkpoint: false,
      command: ["/coredns", "-conf", "/etc/coredns/Corefile"],
    }),
  ];
  const secrets: SimObject[] = [
    {
      namespace: NS,
      name: "kube-apiserver",
      data: {
        "apiserver.crt": fakePem("CERTIFICATE", "apiserver"),
        "apiserver.key": fakePem("EC PRIVATE KEY", "apiserver"),
        "ca.crt": fakePem("CERTIFICATE", "ca"),
        "service-account.pub": fakePem("PUBLIC KEY", "sa"),
      },
    },
    {
      namespace: NS,
      name: "kube-controller-manager",
      data: {
        "ca.crt": fakePem("CERTIFICATE", "ca"),
        "service-account.key": fakePem("EC PRIVATE KEY", "sa"),
      },
    },
  ];
  const configMaps: SimObject[] = [
    { namespace: NS, name: "kube-root-ca.crt", data: { "ca.crt": fakePem("CERTIFICATE", "ca") } },
    {
      namespace: NS,
      name: "apiserver-audit",
      data: {
        "policy.yaml": "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
      },
    },
    {
      namespace: NS,
      name: "scheduler-config",
      data: {
        "config.yaml":
          "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
      },
    },
  ];
  const etcd: Pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "etcd", namespace: NS, labels: { component: "etcd", tier: "control-plane" } },
    spec: {
      hostNetwork: true,
      containers: [{ name: "etcd", image: "registry.k8s.io/etcd:3.6.4-0", command: ["etcd"] }],
    },
  };
  return { pods, secrets, configMaps, staticManifests: [etcd] };
}

/**
 * A node with `count` parents for the benchmarks: each mounts two secrets and one configmap of
 * its own (plus, like every pod, the service-account volume with the shared `kube-root-ca.crt`).
 * `unrelated` more pods run on the node that are no parents, as on a real node: every other one
 * in kube-system without the checkpoint annotation, the rest in a namespace of their own.
 */
export function manyParents(nodeName: string, count: number, unrelated = 0): ControlPlane {
  const pods: Pod[] = [];
  const secrets: SimObject[] = [];
  const configMaps: SimObject[] = [
    { namespace: NS, name: "kube-root-ca.crt", data: { "ca.crt": fakePem("CERTIFICATE", "ca") } },
  ];
  for (let i = 0; i < count; i++) {
    const app = `component-${String(i).padStart(4, "0")}`;
    const tls = `${app}-tls`, credentials = `${app}-credentials`, config = `${app}-config`;
    pods.push(daemonSetPod({
      app,
      suffix: (i * 7919).toString(36).padStart(5, "x"),
      nodeName,
      secrets: [
        { name: tls, mountPath: "/etc/component/tls" },
        { name: credentials, mountPath: "/etc/component/credentials" },
      ],
      configMap: { name: config, key: "config.yaml", mountPath: "/etc/component/config" },
      command: [
        `/usr/local/bin/${app}`,
        "--config=/etc/component/config/config.yaml",
        "--tls-cert-file=/etc/component/tls/tls.crt",
        "--tls-private-key-file=/etc/component/tls/tls.key",
        "--token-file=/etc/component/credentials/token",
      ],
    }));
    secrets.push(
      {
        namespace: NS,
        name: tls,
        data: {
          "tls.crt": fakePem("CERTIFICATE", app),
          "tls.key": fakePem("EC PRIVATE KEY", app),
          "ca.crt": fakePem("CERTIFICATE", "ca"),
        },
      },
      {
        namespace: NS,
        name: credentials,
        data: { token: btoa(`token-of-${app}`.repeat(4)), username: `system:${app}` },
      },
    );
    configMaps.push({
      namespace: NS,
      name: config,
      data: { "config.yaml": `apiVersion: v1\nkind: Config\nname: ${app}\nlogLevel: 2\n` },
    });
  }
  for (let i = 0; i < unrelated; i++) {
    const app = `workload-${String(i).padStart(4, "0")}`;
    pods.push(daemonSetPod({
      app,
      namespace: i % 2 === 0 ? NS : "monitoring",
      suffix: (i * 7919 + 1).toString(36).padStart(5, "y"),
      nodeName,
      checkpoint: false,
      command: [`/usr/local/bin/${app}`, "--v=2"],
    }));
  }
  return { pods, secrets, configMaps, staticManifests: [] };
}
