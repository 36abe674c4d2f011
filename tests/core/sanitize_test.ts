/** The sanitizer (docs/design.md#making-a-checkpoint) on a realistic kube-apiserver pod, and file ownership rules. */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import * as v from "valibot";
import {
  CHECKPOINT_OF_ANNOTATION,
  isCheckpoint,
  isValidParent,
  type Pod,
  PodSchema,
} from "../../lib/core/pod.ts";
import { podFileDirs, storedAccess } from "../../lib/core/checkpoint_layout.ts";
import { apiReferences, CheckpointRefused, sanitizeCheckpoint } from "../../lib/core/sanitize.ts";
import { declaredHostPorts } from "../../lib/core/ports.ts";

const DIRS = {
  secretsDir: "/etc/kubernetes/checkpoint-secrets",
  configmapsDir: "/etc/kubernetes/checkpoint-configmaps",
  nodeName: "cp-1",
};

async function apiserver(): Promise<Pod> {
  const text = await Deno.readTextFile(
    new URL("../fixtures/kube-apiserver-pod.json", import.meta.url),
  );
  return v.parse(PodSchema, JSON.parse(text));
}

Deno.test("metadata: name, namespace and labels kept; one annotation; parent as owner", async () => {
  const parent = await apiserver();
  const { pod } = sanitizeCheckpoint(parent, DIRS);
  assertEquals(pod.apiVersion, "v1");
  assertEquals(pod.kind, "Pod");
  assertEquals(pod.metadata, {
    name: "kube-apiserver-7x2kq",
    namespace: "kube-system",
    labels: parent.metadata.labels,
    annotations: { [CHECKPOINT_OF_ANNOTATION]: "kube-apiserver-7x2kq" },
    ownerReferences: [{
      apiVersion: "v1",
      kind: "Pod",
      name: "kube-apiserver-7x2kq",
      uid: "4f9a3c1e-8d2b-4e57-a0c6-1b9e7d3f5a21",
      controller: true,
    }],
  });
  assertEquals(isCheckpoint(pod), true);
  assertEquals(isValidParent(pod), false);
});

Deno.test("spec: service account, affinity and node selector removed; status cleared", async () => {
  const { pod } = sanitizeCheckpoint(await apiserver(), DIRS);
  const spec = pod.spec as Record<string, unknown>;
  for (const gone of ["serviceAccountName", "serviceAccount", "affinity", "nodeSelector"]) {
    assertEquals(gone in spec, false, gone);
  }
  assertEquals("status" in pod, false);
  // Everything else survives: host network, tolerations, priority, the containers.
  assertEquals(spec.hostNetwork, true);
  assertEquals((spec.tolerations as unknown[]).length, 2);
  assertEquals(spec.priorityClassName, "system-cluster-critical");
  assertEquals((spec.containers as { command: string[] }[])[0].command[0], "kube-apiserver");
});

Deno.test("ports: the copy declares none, so its parent is admitted beside it; named probe ports become numbers", async () => {
  const parent = await apiserver();
  const { pod, warnings } = sanitizeCheckpoint(parent, DIRS);
  assertEquals(declaredHostPorts(parent).map((p) => p.hostPort), [6443]);
  assertEquals(declaredHostPorts(pod), []);
  const [container] = (pod.spec as { containers: Record<string, unknown>[] }).containers;
  assertEquals("ports" in container, false);
  const httpGet = (probe: string) => (container[probe] as { httpGet: unknown }).httpGet;
  assertEquals(httpGet("livenessProbe"), {
    path: "/livez",
    port: 6443,
    host: "127.0.0.1",
    scheme: "HTTPS",
  });
  assertEquals((httpGet("readinessProbe") as { port: unknown }).port, 6443);
  assertEquals(warnings, []);
});

Deno.test("ports: a probe naming a port the container does not declare is kept, and said", () => {
  const parent: Pod = {
    metadata: { name: "p", namespace: "ns", uid: "u1" },
    spec: {
      containers: [{
        name: "c",
        ports: [{ name: "http", containerPort: 8080 }],
        livenessProbe: { tcpSocket: { port: "metrics" } },
      }],
    },
  };
  const { pod, warnings } = sanitizeCheckpoint(parent, DIRS);
  assertEquals((pod.spec as { containers: unknown[] }).containers, [
    { name: "c", livenessProbe: { tcpSocket: { port: "metrics" } } },
  ]);
  assertEquals(warnings, [
    "container c: livenessProbe tcpSocket port metrics names no port the container declares; " +
    "left as it is",
  ]);
});

Deno.test("volumes: secret, configMap and projected become hostPath; others untouched", async () => {
  const { pod, volumes, warnings } = sanitizeCheckpoint(await apiserver(), DIRS);
  const ns = "kube-system", name = "kube-apiserver-7x2kq";
  assertEquals((pod.spec as { volumes: unknown[] }).volumes, [
    { name: "secrets", hostPath: { path: `${DIRS.secretsDir}/${ns}/${name}/kube-apiserver` } },
    {
      name: "audit-policy",
      hostPath: { path: `${DIRS.configmapsDir}/${ns}/${name}/_volumes/audit-policy` },
    },
    { name: "ssl-certs-host", hostPath: { path: "/etc/ssl/certs", type: "" } },
    {
      name: "kube-api-access-5xq8n",
      hostPath: { path: `${DIRS.secretsDir}/${ns}/${name}/_volumes/kube-api-access-5xq8n` },
    },
  ]);
  assertEquals(volumes, [
    {
      volume: "secrets",
      root: DIRS.secretsDir,
      dir: `${DIRS.secretsDir}/${ns}/${name}/kube-apiserver`,
      sources: [{ kind: "secret", name: "kube-apiserver", optional: false }],
    },
    {
      volume: "audit-policy",
      root: DIRS.configmapsDir,
      dir: `${DIRS.configmapsDir}/${ns}/${name}/_volumes/audit-policy`,
      sources: [{
        kind: "configMap",
        name: "apiserver-audit",
        optional: false,
        items: [{ key: "policy.yaml", path: "audit/policy.yaml" }],
      }],
    },
    {
      volume: "kube-api-access-5xq8n",
      root: DIRS.secretsDir,
      dir: `${DIRS.secretsDir}/${ns}/${name}/_volumes/kube-api-access-5xq8n`,
      sources: [
        // The service-account token is dropped; the CA and the namespace file remain.
        {
          kind: "configMap",
          name: "kube-root-ca.crt",
          optional: false,
          items: [{ key: "ca.crt", path: "ca.crt" }],
        },
        { kind: "literal", path: "namespace", content: "kube-system" },
      ],
    },
  ]);
  assertEquals(warnings, []);
  // Every stored file lives under the pod's two directories, which removal deletes.
  const roots = podFileDirs(DIRS, ns, name);
  for (const v of volumes) assertEquals(roots.some((r) => v.dir.startsWith(r + "/")), true);
});

Deno.test("the parent is not modified", async () => {
  const parent = await apiserver();
  const before = structuredClone(parent);
  sanitizeCheckpoint(parent, DIRS);
  assertEquals(parent, before);
});

Deno.test("a pod from a PodList (no apiVersion/kind) still gets a complete owner reference", () => {
  const parent: Pod = { metadata: { name: "p", namespace: "ns", uid: "u1" }, spec: {} };
  const { pod } = sanitizeCheckpoint(parent, DIRS);
  assertEquals((pod.metadata.ownerReferences as unknown[])[0], {
    apiVersion: "v1",
    kind: "Pod",
    name: "p",
    uid: "u1",
    controller: true,
  });
  assertEquals("labels" in pod.metadata, false);
});

Deno.test("downward API items render from the parent's metadata", () => {
  const parent: Pod = {
    metadata: {
      name: "p",
      namespace: "ns",
      uid: "u1",
      labels: { tier: "control-plane", app: "x" },
      annotations: { a: "1" },
    },
    spec: {
      containers: [{ name: "c", resources: { limits: { cpu: "1500m", memory: "1Gi" } } }],
      volumes: [{
        name: "info",
        projected: {
          sources: [{
            downwardAPI: {
              items: [
                { path: "name", fieldRef: { fieldPath: "metadata.name" } },
                { path: "uid", fieldRef: { fieldPath: "metadata.uid" } },
                { path: "labels", fieldRef: { fieldPath: "metadata.labels" } },
                { path: "tier", fieldRef: { fieldPath: "metadata.labels['tier']" } },
                { path: "annotations", fieldRef: { fieldPath: "metadata.annotations" } },
                {
                  path: "cpu",
                  resourceFieldRef: { containerName: "c", resource: "limits.cpu" },
                },
                {
                  path: "mem-mi",
                  resourceFieldRef: {
                    containerName: "c",
                    resource: "limits.memory",
                    divisor: "1Mi",
                  },
                },
                {
                  path: "cpu-m",
                  resourceFieldRef: { containerName: "c", resource: "limits.cpu", divisor: "1m" },
                },
                {
                  path: "req",
                  resourceFieldRef: { containerName: "c", resource: "requests.memory" },
                },
                {
                  path: "unknown-limit",
                  resourceFieldRef: { containerName: "c", resource: "limits.ephemeral-storage" },
                },
              ],
            },
          }, { clusterTrustBundle: { name: "x", path: "b" } }],
        },
      }],
    },
  };
  const { volumes, warnings } = sanitizeCheckpoint(parent, DIRS);
  const files = Object.fromEntries(
    volumes[0].sources.map((s) => s.kind === "literal" ? [s.path, s.content] : ["?", ""]),
  );
  assertEquals(files, {
    name: "p",
    uid: "u1",
    labels: 'app="x"\ntier="control-plane"',
    tier: "control-plane",
    annotations: 'a="1"',
    cpu: "2",
    "mem-mi": "1024",
    "cpu-m": "1500",
    req: "0",
  });
  assertEquals(warnings.length, 2);
  assertEquals(warnings[0].includes("limits.ephemeral-storage"), true);
  assertEquals(warnings[1].includes("clusterTrustBundle"), true);
});

Deno.test("environment taken from secrets or configmaps is kept, and said: only the API server has it", () => {
  const parent: Pod = {
    metadata: { name: "p", namespace: "kube-system", uid: "u1" },
    spec: {
      initContainers: [{
        name: "init",
        envFrom: [{ configMapRef: { name: "settings" } }, { prefix: "X_" }],
      }],
      containers: [{
        name: "etcd",
        env: [
          { name: "PLAIN", value: "1" },
          { name: "NODE", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
          { name: "PASSWORD", valueFrom: { secretKeyRef: { name: "creds", key: "password" } } },
          {
            name: "LEVEL",
            valueFrom: { configMapKeyRef: { name: "settings", key: "level", optional: true } },
          },
        ],
        envFrom: [{ secretRef: { name: "tokens" } }],
      }],
    },
  };
  const unreadable = "which a static pod cannot read while the API server is down (and a " +
    "kubelet from 1.34 refuses it outright)";
  const expected = [
    `container init: envFrom configmap settings, ${unreadable}`,
    `container etcd: env PASSWORD comes from secret creds (key password), ${unreadable}`,
    `container etcd: env LEVEL comes from configmap settings (key level), ${unreadable}`,
    `container etcd: envFrom secret tokens, ${unreadable}`,
  ];
  assertEquals(apiReferences(parent), expected);
  const { pod, warnings } = sanitizeCheckpoint(parent, DIRS);
  assertEquals(warnings, expected);
  // Kept as they are: inlining them would put secrets where the API server mirrors them.
  assertEquals(pod.spec, parent.spec);
  assertEquals(apiReferences(pod), expected);
});

Deno.test("stored access: directories the agent's; files readable by fsGroup, else by the one non-root user", async () => {
  const spec = (s: Record<string, unknown>): Pod => ({
    metadata: { name: "p", namespace: "n" },
    spec: s,
  });
  const agentOnly = {
    dir: { uid: 0, gid: 0, mode: 0o700 },
    file: { uid: 0, gid: 0, mode: 0o600 },
  };
  const group = (gid: number) => ({
    dir: { uid: 0, gid, mode: 0o750 },
    file: { uid: 0, gid, mode: 0o640 },
  });
  const user = (uid: number) => ({
    dir: { uid: 0, gid: 0, mode: 0o755 },
    file: { uid, gid: 0, mode: 0o600 },
  });
  const table: [string, Pod, unknown][] = [
    ["nothing set", spec({ containers: [{ name: "a" }] }), agentOnly],
    ["kube-apiserver fixture", await apiserver(), group(65534)],
    [
      "container user",
      spec({ containers: [{ name: "a", securityContext: { runAsUser: 1000 } }, { name: "b" }] }),
      user(1000),
    ],
    [
      "container overrides pod, with an fsGroup",
      spec({
        securityContext: { runAsUser: 1000, fsGroup: 2000 },
        containers: [{ name: "a", securityContext: { runAsUser: 0 } }, { name: "b" }],
      }),
      group(2000),
    ],
    [
      "two users and an fsGroup: both read through the group",
      spec({
        securityContext: { fsGroup: 3000 },
        containers: [{ name: "a", securityContext: { runAsUser: 1000 } }],
        initContainers: [{ name: "i", securityContext: { runAsUser: 1001 } }],
      }),
      group(3000),
    ],
    [
      "conflicting users",
      spec({
        containers: [{ name: "a", securityContext: { runAsUser: 1000 } }],
        initContainers: [{ name: "i", securityContext: { runAsUser: 1001 } }],
      }),
      {
        error: "containers run as different users (1001, 1000) and no fsGroup is set, so no " +
          "file can be readable by all of them alone",
      },
    ],
  ];
  for (const [label, pod, want] of table) assertEquals(storedAccess(pod, 0), want, label);
  // An agent that is not root (the demo as a user) keeps what it makes its own.
  assertEquals(storedAccess(spec({ securityContext: { fsGroup: 5 } }), 1234), {
    dir: { uid: 1234, gid: 5, mode: 0o750 },
    file: { uid: 1234, gid: 5, mode: 0o640 },
  });
});

/** A pod with one container mounting each of `volumes` (by name), read-write unless said. */
function mounting(volumes: Record<string, unknown>[], readOnly?: boolean): Pod {
  return {
    metadata: { name: "p", namespace: "n", uid: "u" },
    spec: {
      containers: [{
        name: "c",
        image: "i",
        volumeMounts: volumes.map((v, i) => ({
          name: v.name,
          mountPath: `/m${i}`,
          ...(readOnly === undefined ? {} : { readOnly }),
        })),
      }],
      initContainers: [{
        name: "init",
        image: "i",
        volumeMounts: [{ name: "s", mountPath: "/s" }],
      }],
      volumes,
    },
  };
}

Deno.test("every mount of a stored volume is read-only, whatever the parent said; others are left", () => {
  const volumes = [
    { name: "s", secret: { secretName: "tls" } },
    { name: "c", configMap: { name: "cfg" } },
    { name: "p", projected: { sources: [{ downwardAPI: { items: [] } }] } },
    { name: "scratch", emptyDir: {} },
  ];
  for (const given of [undefined, false, true]) {
    const spec = sanitizeCheckpoint(mounting(volumes, given), DIRS).pod.spec as {
      containers: { volumeMounts: { name: string; readOnly?: boolean }[] }[];
      initContainers: { volumeMounts: { name: string; readOnly?: boolean }[] }[];
    };
    assertEquals(
      spec.containers[0].volumeMounts.map((m) => [m.name, m.readOnly]),
      [["s", true], ["c", true], ["p", true], ["scratch", given]],
      `parent said ${given}`,
    );
    assertEquals(spec.initContainers[0].volumeMounts[0].readOnly, true);
  }
});

Deno.test("names no object or volume can have never become paths: optional sources dropped, the rest refused", () => {
  const refused = (volumes: Record<string, unknown>[]) => {
    try {
      sanitizeCheckpoint(mounting(volumes), DIRS);
    } catch (e) {
      if (e instanceof CheckpointRefused) return e.message.replace(/^cannot be checkpointed: /, "");
      throw e;
    }
    return undefined;
  };
  // The API server takes any non-empty secretName; `t/u` would nest directories.
  const optional = sanitizeCheckpoint(
    mounting([
      { name: "a", secret: { secretName: "t/u", optional: true } },
      { name: "b", configMap: { name: "t/u/w/manifests", optional: true } },
      {
        name: "c",
        projected: {
          sources: [
            { secret: { name: "../x", optional: true } },
            { configMap: { name: "good", optional: true } },
          ],
        },
      },
    ]),
    DIRS,
  );
  // Their volumes are stored under the volume's name, with nothing from those objects.
  assertEquals(optional.volumes.map((v) => [v.volume, v.dir, v.sources]), [
    ["a", `${DIRS.secretsDir}/n/p/_volumes/a`, []],
    ["b", `${DIRS.configmapsDir}/n/p/_volumes/b`, []],
    ["c", `${DIRS.secretsDir}/n/p/_volumes/c`, [{
      kind: "configMap",
      name: "good",
      optional: true,
    }]],
  ]);
  assertEquals(optional.warnings.slice(0, 3), [
    'volume a: secret name "t/u" is not a valid name; no object can have it, so the volume gets nothing from it',
    'volume b: configMap name "t/u/w/manifests" is not a valid name; no object can have it, so the volume gets nothing from it',
    'volume c: secret name "../x" is not a valid name; no object can have it, so the volume gets nothing from it',
  ]);
  assertEquals(
    refused([{ name: "a", secret: { secretName: "t/u" } }]),
    'volume a: secret name "t/u" is not a valid name, and the secret is not optional',
  );
  assertEquals(
    refused([{ name: "../v", secret: { secretName: "tls" } }]),
    'volume name "../v" is not a valid volume name (a DNS-1123 label)',
  );
  for (const path of ["../x", "/etc/x", "a//b", "..data", "", "./x"]) {
    const message = refused([{
      name: "a",
      configMap: { name: "cfg", items: [{ key: "k", path }] },
    }]);
    assertEquals(
      message?.startsWith(`volume a: item path ${JSON.stringify(path)} refused: `),
      true,
    );
    const downward = refused([{
      name: "a",
      projected: {
        sources: [{ downwardAPI: { items: [{ path, fieldRef: { fieldPath: "metadata.name" } }] } }],
      },
    }]);
    assertEquals(
      downward?.startsWith(`volume a: item path ${JSON.stringify(path)} refused: `),
      true,
    );
  }
  // Volumes the agent does not rewrite are the kubelet's business, whatever their names.
  assertEquals(refused([{ name: "Not_A_Label", emptyDir: {} }]), undefined);
});

Deno.test("volumes backed by API objects and resource claims are said; other volumes are not", () => {
  const pod: Pod = {
    metadata: { name: "p", namespace: "n" },
    spec: {
      containers: [{ name: "c", image: "i" }],
      volumes: [
        { name: "host", hostPath: { path: "/etc/ssl" } },
        { name: "scratch", emptyDir: {} },
        { name: "data", persistentVolumeClaim: { claimName: "data" } },
        { name: "fast", ephemeral: { volumeClaimTemplate: { spec: {} } } },
        { name: "vault", csi: { driver: "secrets-store.csi.k8s.io" } },
        { name: "ceph", cephfs: { monitors: ["m"], secretRef: { name: "ceph" } } },
      ],
      resourceClaims: [{ name: "gpu" }],
    },
  };
  const tail = ", which a static pod cannot read while the API server is down (and a kubelet " +
    "from 1.34 refuses it outright)";
  assertEquals(apiReferences(pod), [
    `volume data: a persistent volume claim${tail}`,
    `volume fast: a persistent volume claim (ephemeral volume)${tail}`,
    `volume vault: a CSI driver${tail}`,
    `volume ceph: a cephfs secret${tail}`,
    `resourceClaims${tail}`,
  ]);
});

Deno.test("pull secrets and ephemeral containers are dropped: a kubelet would refuse the copy", () => {
  const parent: Pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "p", namespace: "n", uid: "u" },
    spec: {
      containers: [{ name: "c", image: "registry.example/c:1" }],
      imagePullSecrets: [{ name: "registry" }],
      ephemeralContainers: [{ name: "debugger", image: "busybox", targetContainerName: "c" }],
    },
  };
  const { pod, warnings } = sanitizeCheckpoint(parent, DIRS);
  assertEquals(pod.spec, { containers: [{ name: "c", image: "registry.example/c:1" }] });
  assertEquals(warnings, []);
});
