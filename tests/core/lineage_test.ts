/**
 * Lineage's pure parts: which checkpoint is a new parent's predecessor (findPredecessor), and the
 * predecessor's parent re-made in the heir's identity (inheritedParent).
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import {
  controllerOf,
  findPredecessor,
  inheritedParent,
  originParent,
  type VersionInPlace,
} from "../../lib/core/lineage.ts";
import type { Pod } from "../../lib/core/pod.ts";
import { sanitizeCheckpoint } from "../../lib/core/sanitize.ts";

/** Versions made `madeAtS` seconds after this instant. */
const MADE = 1_700_000_000_000_000_000n;
const DS = { kind: "DaemonSet", uid: "ds-apiserver" };

function pod(
  name: string,
  controller?: { kind: string; uid: string; controller?: boolean },
  namespace = "kube-system",
): Pod {
  return {
    metadata: {
      name,
      namespace,
      uid: `uid-${name}`,
      ...(controller
        ? {
          ownerReferences: [
            { apiVersion: "v1", kind: "Node", name: "cp-1", uid: "node-uid" },
            { apiVersion: "apps/v1", name: "x", controller: true, ...controller },
          ],
        }
        : {}),
    },
    spec: { containers: [{ name: "c", image: "img:1" }] },
  };
}

function inPlace(
  name: string,
  controller?: { kind: string; uid: string; controller?: boolean },
  madeAtS = 0n,
  namespace = "kube-system",
): VersionInPlace {
  return {
    id: `${namespace}/${name}`,
    version: 1,
    parent: pod(name, controller, namespace),
    madeAt: MADE + madeAtS * 1_000_000_000n,
  };
}

Deno.test("findPredecessor: every case", () => {
  const heir = pod("kube-apiserver-9fj3m", DS);
  const rows: [string, Pod, VersionInPlace[], string | undefined][] = [
    ["same controller uid and kind", heir, [inPlace("kube-apiserver-7x2kq", DS)], "7x2kq"],
    ["no checkpoint at all", heir, [], undefined],
    [
      "a controller of another uid",
      heir,
      [inPlace("kube-apiserver-7x2kq", { ...DS, uid: "ds-other" })],
      undefined,
    ],
    [
      "the same uid, another kind",
      heir,
      [inPlace("kube-apiserver-7x2kq", { ...DS, kind: "ReplicaSet" })],
      undefined,
    ],
    [
      "an owner with the same uid that is not the controller",
      heir,
      [inPlace("kube-apiserver-7x2kq", { ...DS, controller: false })],
      undefined,
    ],
    ["the predecessor has no controller", heir, [inPlace("kube-apiserver-7x2kq")], undefined],
    [
      "the heir has no controller",
      pod("kube-apiserver-9fj3m"),
      [inPlace("kube-apiserver-7x2kq", DS)],
      undefined,
    ],
    [
      "a StatefulSet's pods are replicas, never replacements",
      pod("etcd-1", { kind: "StatefulSet", uid: "sts" }),
      [inPlace("etcd-0", { kind: "StatefulSet", uid: "sts" })],
      undefined,
    ],
    [
      "another namespace",
      heir,
      [inPlace("kube-apiserver-7x2kq", DS, 0n, "kube-public")],
      undefined,
    ],
    [
      "its own checkpoint is not its predecessor",
      heir,
      [inPlace("kube-apiserver-9fj3m", DS)],
      undefined,
    ],
    [
      "several: the newest version in place",
      heir,
      [
        inPlace("kube-apiserver-aaaaa", DS, 10n),
        inPlace("kube-apiserver-bbbbb", DS, 30n),
        inPlace("kube-apiserver-ccccc", DS, 20n),
      ],
      "bbbbb",
    ],
    [
      "several made at once: the smallest id, whatever the order",
      heir,
      [inPlace("kube-apiserver-zzzzz", DS, 5n), inPlace("kube-apiserver-bbbbb", DS, 5n)],
      "bbbbb",
    ],
    [
      "several, one of another controller newer: the newest of the same",
      heir,
      [
        inPlace("kube-apiserver-aaaaa", DS, 1n),
        inPlace("kube-scheduler-x", { ...DS, uid: "s" }, 9n),
      ],
      "aaaaa",
    ],
  ];
  for (const [what, h, versions, want] of rows) {
    const id = `${h.metadata.namespace}/${h.metadata.name}`;
    for (const order of [versions, [...versions].reverse()]) {
      const got = findPredecessor(h, id, order);
      assertEquals(got?.id.split("-").at(-1), want, what);
    }
  }
});

Deno.test("controllerOf: the ownerReference with controller true, and a uid", () => {
  assertEquals(controllerOf(pod("a", DS)), DS);
  assertEquals(controllerOf(pod("a")), undefined);
  assertEquals(controllerOf(pod("a", { ...DS, controller: false })), undefined);
  assertEquals(controllerOf(pod("a", { ...DS, uid: "" })), undefined);
});

Deno.test("inheritedParent: the predecessor's spec and labels in the heir's identity", () => {
  const old: Pod = {
    ...pod("kube-apiserver-7x2kq", DS),
    metadata: {
      ...pod("kube-apiserver-7x2kq", DS).metadata,
      labels: { "pod-template-generation": "1" },
      managedFields: [{ manager: "kube-controller-manager" }],
    },
    spec: {
      containers: [{ name: "c", image: "img:good" }],
      volumes: [{
        name: "info",
        projected: {
          sources: [{
            downwardAPI: { items: [{ path: "name", fieldRef: { fieldPath: "metadata.name" } }] },
          }],
        },
      }, { name: "tls", secret: { secretName: "tls" } }],
    },
    status: { phase: "Running" },
  };
  const heir: Pod = {
    ...pod("kube-apiserver-9fj3m", DS),
    metadata: { ...pod("kube-apiserver-9fj3m", DS).metadata, labels: { g: "2" } },
    spec: { containers: [{ name: "c", image: "img:bad" }] },
  };
  const made = inheritedParent(originParent(old), heir);
  assertEquals(made.metadata.name, "kube-apiserver-9fj3m");
  assertEquals(made.metadata.uid, "uid-kube-apiserver-9fj3m");
  assertEquals(made.metadata.labels, { "pod-template-generation": "1" });
  assertEquals(made.metadata.managedFields, undefined);
  assertEquals(made.status, undefined);
  assertEquals(made.spec, old.spec);
  // Everything the sanitizer derives from the identity is the heir's.
  const sanitized = sanitizeCheckpoint(
    made,
    { secretsDir: "/s", configmapsDir: "/c", nodeName: "cp-1" },
    1,
  );
  assertEquals(sanitized.pod.metadata.name, "kube-apiserver-9fj3m");
  assertEquals(sanitized.volumes.map((v) => v.dir), [
    "/s/kube-system/kube-apiserver-9fj3m/_volumes/info",
    "/s/kube-system/kube-apiserver-9fj3m/tls",
  ]);
  assertEquals(sanitized.volumes[0].sources, [{
    kind: "literal",
    path: "name",
    content: "kube-apiserver-9fj3m",
  }]);
  // A heir without a uid does not take the predecessor's.
  const { uid: _, ...noUid } = heir.metadata;
  assertEquals(inheritedParent(old, { ...heir, metadata: noUid }).metadata.uid, undefined);
});
