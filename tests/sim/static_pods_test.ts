/**
 * The simulated kubelet's own reading of the static-pod dir (lib/sim/static_pods.ts): which
 * files it reads, how it decodes them, what it refuses to run, and where it and the agent's
 * reader (lib/disk/manifests.ts) part ways.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { stringify as toYaml } from "yaml";
import { readManifestDir } from "../../lib/disk/manifests.ts";
import { decodeStaticPod, readStaticPodDir, type StaticPod } from "../../lib/sim/static_pods.ts";
import { withTempDir } from "../helpers/temp_dir.ts";

const NODE = "cp-1";

type Doc = Record<string, unknown>;

/** A static pod the kubelet runs: what each case below changes one thing of. */
function manifest(): Doc {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: "kube-apiserver",
      namespace: "kube-system",
      annotations: { "checkpointer.alpha.coreos.com/checkpoint-of": "kube-apiserver" },
      ownerReferences: [{ apiVersion: "v1", kind: "Pod", name: "kube-apiserver", uid: "u1" }],
    },
    spec: {
      hostNetwork: true,
      containers: [{
        name: "kube-apiserver",
        image: "registry.k8s.io/kube-apiserver:v1.34.2",
        livenessProbe: { httpGet: { path: "/livez", port: 6443, scheme: "HTTPS" } },
        volumeMounts: [{ name: "secrets", mountPath: "/etc/kubernetes/secrets" }],
      }],
      volumes: [{ name: "secrets", hostPath: { path: "/etc/kubernetes/checkpoint-secrets/x" } }],
    },
  };
}

/** The manifest with `change` applied to a copy. */
function changed(change: (doc: Doc & { metadata: Doc; spec: Doc }) => void): string {
  const doc = structuredClone(manifest()) as Doc & { metadata: Doc; spec: Doc };
  change(doc);
  return JSON.stringify(doc);
}

function container(doc: { spec: Doc }): Doc {
  return (doc.spec.containers as Doc[])[0];
}

function decoded(text: string): StaticPod {
  const result = decodeStaticPod(text, NODE);
  if ("error" in result) throw new Error(result.error);
  return result.pod;
}

Deno.test("a valid manifest, JSON or YAML, is the pod the kubelet runs", () => {
  assertEquals(decoded(JSON.stringify(manifest())), manifest());
  assertEquals(decoded(toYaml(manifest())), manifest());
});

Deno.test("YAML is read as the kubelet's converter reads it: YAML 1.1, first document", () => {
  const yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: b}\n" +
    "spec:\n  containers: [{name: c, image: i}]\n" +
    "  volumes: [{name: v, secretMode: 0644, hostPath: {path: /x}}]\n---\nkind: Other\n";
  assertEquals((decoded(yaml).spec.volumes as Doc[])[0].secretMode, 0o644);
  const onOff = "apiVersion: v1\nkind: Pod\nmetadata: {name: a, annotations: {x: yes}}\n";
  const refused = decodeStaticPod(onOff, NODE);
  assert("error" in refused && refused.error.includes("metadata.annotations.x"));
});

Deno.test("an empty namespace becomes default, as the kubelet defaults it", () => {
  const pod = decoded(changed((doc) => delete doc.metadata.namespace));
  assertEquals(pod.metadata.namespace, "default");
  assertEquals(
    decoded(changed((doc) => doc.metadata.namespace = "")).metadata.namespace,
    "default",
  );
});

Deno.test("the kubelet names a static pod <name>-<node>, and takes it up to 253 characters", () => {
  const name = "a".repeat(253 - `-${NODE}`.length);
  assertEquals(decoded(changed((doc) => doc.metadata.name = name)).metadata.name, name);
});

const REFUSED: [string, string, string][] = [
  ["not JSON or YAML", "{ not json", "couldn't parse as pod"],
  ["a YAML list", "- a\n- b\n", "cannot unmarshal array"],
  ["no kind", changed((doc) => delete doc.kind), "Object 'Kind' is missing"],
  ["no apiVersion", changed((doc) => delete doc.apiVersion), "Object 'apiVersion' is missing"],
  ["not a Pod", changed((doc) => doc.kind = "Deployment"), "is not a v1 Pod"],
  ["a Pod of another version", changed((doc) => doc.apiVersion = "v2"), "is not a v1 Pod"],
  ["no name", changed((doc) => delete doc.metadata.name), "name is needed for the pod"],
  ["a name of another type", changed((doc) => doc.metadata.name = 7), "metadata.name"],
  ["a label value not a string", changed((doc) => doc.metadata.labels = { a: 1 }), "labels.a"],
  ["a name not DNS", changed((doc) => doc.metadata.name = "Kube_API"), "metadata.name"],
  [
    "a name that with the node's is longer than a pod name may be",
    changed((doc) => doc.metadata.name = "a".repeat(253 - `-${NODE}`.length + 1)),
    "metadata.name",
  ],
  ["a namespace not DNS", changed((doc) => doc.metadata.namespace = "a.b"), "metadata.namespace"],
  [
    "an owner reference without uid",
    changed((doc) => delete (doc.metadata.ownerReferences as Doc[])[0].uid),
    "metadata.ownerReferences[0].uid: Required value",
  ],
  ["no containers", changed((doc) => doc.spec.containers = []), "spec.containers: Required"],
  [
    "a container without image",
    changed((doc) => delete container(doc).image),
    "spec.containers[0].image: Required value",
  ],
  [
    "two containers of one name",
    changed((doc) => (doc.spec.containers as Doc[]).push({ ...container(doc) })),
    "spec.containers[1].name: Duplicate value",
  ],
  [
    "an ephemeral container",
    changed((doc) => doc.spec.ephemeralContainers = [{ name: "debug", image: "busybox" }]),
    "spec.ephemeralContainers: Forbidden",
  ],
  [
    "a volume with two sources",
    changed((doc) => (doc.spec.volumes as Doc[])[0].secret = { secretName: "s" }),
    "may not specify more than 1 volume type",
  ],
  [
    "a volume without a source",
    changed((doc) => delete (doc.spec.volumes as Doc[])[0].hostPath),
    "must specify a volume type",
  ],
  [
    "a mount of a volume the pod does not have",
    changed((doc) => doc.spec.volumes = []),
    "volumeMounts[0].name: Not found",
  ],
  [
    "a probe port that is neither a number nor a name",
    changed((doc) => ((container(doc).livenessProbe as Doc).httpGet as Doc).port = "6443"),
    "livenessProbe.httpGet.port",
  ],
  [
    "a probe port out of range",
    changed((doc) => ((container(doc).livenessProbe as Doc).httpGet as Doc).port = 0),
    "livenessProbe.httpGet.port",
  ],
  [
    "a service account",
    changed((doc) => doc.spec.serviceAccountName = "default"),
    "static pods may not reference serviceaccounts",
  ],
  [
    "an image pull secret",
    changed((doc) => doc.spec.imagePullSecrets = [{ name: "registry" }]),
    "static pods may not reference secrets",
  ],
  [
    "environment from a secret",
    changed((doc) =>
      container(doc).env = [{ name: "T", valueFrom: { secretKeyRef: { name: "s", key: "k" } } }]
    ),
    "static pods may not reference secrets",
  ],
  [
    "environment from a configmap",
    changed((doc) => container(doc).envFrom = [{ configMapRef: { name: "c" } }]),
    "static pods may not reference configmaps",
  ],
  [
    "a projected service-account token",
    changed((doc) =>
      (doc.spec.volumes as Doc[])[0] = {
        name: "secrets",
        projected: { sources: [{ serviceAccountToken: { path: "token" } }] },
      }
    ),
    "static pods may not reference serviceaccounts (via projected volumes)",
  ],
  [
    "a persistent volume claim",
    changed((doc) =>
      (doc.spec.volumes as Doc[])[0] = {
        name: "secrets",
        persistentVolumeClaim: { claimName: "c" },
      }
    ),
    "static pods may not reference persistentvolumeclaims",
  ],
];

for (const [label, text, said] of REFUSED) {
  Deno.test(`refused, never run: ${label}`, () => {
    const result = decodeStaticPod(text, NODE);
    assert("error" in result, `${label}: decoded as a pod`);
    assert(result.error.includes(said), `${result.error} should say ${said}`);
  });
}

Deno.test("a projected volume of the downward API alone references nothing", () => {
  decoded(changed((doc) =>
    (doc.spec.volumes as Doc[])[0] = {
      name: "secrets",
      projected: { sources: [{ downwardAPI: { items: [] } }] },
    }
  ));
});

Deno.test("the directory: every file not starting with a dot, in name order; the rest logged", async () => {
  await withTempDir(async (dir) => {
    const pod = (name: string) => changed((doc) => doc.metadata.name = name);
    await Deno.writeTextFile(join(dir, "b.yaml"), pod("b"));
    await Deno.writeTextFile(join(dir, "a.manifest"), pod("a"));
    await Deno.writeTextFile(join(dir, ".c.json.swp"), pod("c"));
    await Deno.writeTextFile(join(dir, "d"), "not a pod");
    await Deno.mkdir(join(dir, "e"));
    await Deno.writeTextFile(join(dir, "e", "f.json"), pod("f"));
    await Deno.symlink(join(dir, "b.yaml"), join(dir, "g.json"));
    await Deno.symlink(join(dir, "missing"), join(dir, "h.json"));
    const read = readStaticPodDir(dir, NODE);
    assertEquals(read.pods.map((p) => p.metadata.name), ["a", "b", "b"]);
    assertEquals(read.log.map((l) => l.path), ["d", "e", "h.json"].map((n) => join(dir, n)));
    assert(read.log[0].line.startsWith(`Can't process manifest file "${join(dir, "d")}"`));
    assertEquals(read.log[1].line, `Not recursing into manifest path "${join(dir, "e")}"`);
    assertEquals(readStaticPodDir(join(dir, "absent"), NODE), { pods: [], log: [] });
  });
});

Deno.test("where the agent's reader and the kubelet part ways, each way", async () => {
  await withTempDir(async (dir) => {
    // The agent reads both as checkpoints; the kubelet runs neither.
    await Deno.writeTextFile(join(dir, "no-kind.json"), changed((doc) => delete doc.kind));
    await Deno.writeTextFile(
      join(dir, "secret-env.json"),
      changed((doc) =>
        container(doc).env = [{ name: "T", valueFrom: { secretKeyRef: { name: "s", key: "k" } } }]
      ),
    );
    // The kubelet runs it in namespace default; the agent reads it as no pod at all.
    await Deno.writeTextFile(
      join(dir, "no-namespace.json"),
      changed((doc) => delete doc.metadata.namespace),
    );
    const agent = await readManifestDir(dir);
    assertEquals(agent.manifests.map((m) => m.file.split("/").pop()), [
      "no-kind.json",
      "secret-env.json",
    ]);
    assertEquals(agent.problems.map((p) => p.file.split("/").pop()), ["no-namespace.json"]);
    const kubelet = readStaticPodDir(dir, NODE);
    assertEquals(kubelet.pods.map((p) => `${p.metadata.namespace}/${p.metadata.name}`), [
      "default/kube-apiserver",
    ]);
    assertEquals(kubelet.log.map((l) => l.path.split("/").pop()), [
      "no-kind.json",
      "secret-env.json",
    ]);
  });
});
