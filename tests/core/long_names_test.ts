/**
 * Names built from ids (docs/design.md#long-names): every one fits where it goes — a file name in
 * NAME_MAX, a copy's name where the kubelet takes it — short ids keep the names they always had,
 * and no two ids ever share one.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import {
  manifestFileNames,
  unambiguousManifestFileName,
  versionsDir,
} from "../../lib/core/checkpoint_layout.ts";
import {
  checkpointPodName,
  copyPodId,
  isValidObjectName,
  MAX_NAME_BYTES,
  parseValidId,
} from "../../lib/core/ids.ts";
import { assignManifestNames } from "../../lib/core/manifest_names.ts";
import { CHECKPOINT_OF_ANNOTATION, checkpointIdOf, type Pod, podId } from "../../lib/core/pod.ts";
import { sanitizeCheckpoint } from "../../lib/core/sanitize.ts";
import { isStatusFileName, statusFileName } from "../../lib/store/layout.ts";

const NODE = "cp-1";
const SITE = {
  secretsDir: "/etc/kubernetes/checkpoint-secrets",
  configmapsDir: "/etc/kubernetes/checkpoint-configmaps",
  nodeName: NODE,
};
const LONG_NODE = "ip-10-0-12-34.eu-west-1.compute.internal";
const LONG_NS = `tenant-${"n".repeat(56)}`; // 63 characters

/** A valid name of exactly `length` characters, with dots and dashes, ending in `end`. */
function nameOf(length: number, end = "z"): string {
  const body = "abc-def.ghi".repeat(Math.ceil(length / 11));
  return `${body.slice(0, length - end.length)}${end}`;
}

const bytes = (name: string) => new TextEncoder().encode(name).length;

/** What the kubelet makes of a static pod's name: its pod name and its log directory. */
function kubeletTakes(namespace: string, name: string, node: string): boolean {
  const copy = `${name}-${node}`;
  return isValidObjectName(copy) && bytes(`${namespace}_${copy}_${"0".repeat(32)}`) <= 255;
}

/** Ids that tempt every rule: the longest, those alike but in one character, clashing ones. */
const IDS = [
  "kube-system/kube-apiserver-7x2kq",
  "kube-system/x",
  "kube/system-x",
  `${LONG_NS}/${nameOf(253)}`,
  `${LONG_NS}/${nameOf(253, "y")}`,
  `${LONG_NS}/${nameOf(252)}`,
  `${LONG_NS.slice(0, 62)}/${nameOf(253)}`,
  `${LONG_NS.slice(0, 62)}/n-${nameOf(251)}`,
  `kube-system/${nameOf(238)}`, // 249 + .json: the longest unshortened
  `kube-system/${nameOf(239)}`, // one more: shortened
  `kube-system/${nameOf(239, "a")}`,
  `a/${nameOf(253)}`,
  `a/${nameOf(253, ".z")}`,
];

Deno.test("the ids tried are valid ids", () => {
  for (const id of IDS) assert(parseValidId(id), id);
});

Deno.test("short ids keep every name they always had", () => {
  const id = "kube-system/kube-apiserver-7x2kq";
  assertEquals(manifestFileNames(id), [
    "kube-system-kube-apiserver-7x2kq.json",
    "kube-system_kube-apiserver-7x2kq.json",
  ]);
  assertEquals(
    versionsDir({ inactiveDir: "/i" }, id),
    "/i/.versions/kube-system_kube-apiserver-7x2kq",
  );
  assertEquals(statusFileName(id), "kube-system_kube-apiserver-7x2kq.json");
  assertEquals(checkpointPodName(id, NODE), "kube-apiserver-7x2kq");
  assertEquals(copyPodId(id, NODE), "kube-system/kube-apiserver-7x2kq-cp-1");
  // The longest id whose names fit keeps them too, to the byte.
  const longest = `kube-system/${nameOf(238)}`;
  assertEquals(manifestFileNames(longest), [
    `kube-system-${nameOf(238)}.json`,
    `kube-system_${nameOf(238)}.json`,
  ]);
  assertEquals(bytes(unambiguousManifestFileName(longest)), MAX_NAME_BYTES);
});

Deno.test("every name of every id fits: file names in NAME_MAX, copies where the kubelet takes them", () => {
  for (const id of IDS) {
    const [namespace] = id.split("/");
    for (const name of [...manifestFileNames(id), statusFileName(id)]) {
      assert(bytes(name) <= MAX_NAME_BYTES, `${id}: ${name}`);
    }
    const stem = versionsDir({ inactiveDir: "/i" }, id).slice("/i/.versions/".length);
    assert(bytes(stem) <= MAX_NAME_BYTES, `${id}: ${stem}`);
    for (const node of [NODE, LONG_NODE]) {
      const name = checkpointPodName(id, node);
      assert(kubeletTakes(namespace, name, node), `${id} on ${node}: ${name}`);
      assertEquals(copyPodId(id, node), `${namespace}/${name}-${node}`);
    }
  }
});

Deno.test("a shortened name is as long as fits, the start of the name and a hash of the id", () => {
  const id = `${LONG_NS}/${nameOf(253)}`;
  const [bootkube, unambiguous] = manifestFileNames(id);
  // One name for both: only this id can have it.
  assertEquals(bootkube, unambiguous);
  assertEquals(bytes(unambiguous), MAX_NAME_BYTES);
  assert(unambiguous.startsWith(`${LONG_NS}_abc-def.ghi`), unambiguous);
  assert(/_[0-9a-f]{32}\.json$/.test(unambiguous), unambiguous);
  const name = checkpointPodName(id, NODE);
  assertEquals(`${LONG_NS}_${name}-${NODE}_${"0".repeat(32)}`.length, 255);
  assert(/^abc-def\.ghi.*-[0-9a-f]{32}$/.test(name), name);
  // A cut right after a dot drops it: the start stays a name, with no `.-` before the hash.
  const cut = checkpointPodName(`${LONG_NS.slice(0, 62)}/${nameOf(253)}`, LONG_NODE);
  assertEquals(nameOf(253)[84], ".");
  assertEquals(cut.length, 84 + 1 + 32);
  assert(cut.startsWith(`${nameOf(253).slice(0, 84)}-`), cut);
  // The hash is of the id: the same id, the same name, on every node that leaves it room.
  assertEquals(
    cut.slice(-32),
    checkpointPodName(`${LONG_NS.slice(0, 62)}/${nameOf(253)}`, NODE).slice(-32),
  );
});

Deno.test("no two ids share a name: not a file, not a versions dir, not a copy's name", () => {
  const owners = new Map<string, Set<string>>();
  const claim = (what: string, id: string) => {
    owners.set(what, (owners.get(what) ?? new Set()).add(id));
  };
  for (const id of IDS) {
    claim(`unambiguous ${unambiguousManifestFileName(id)}`, id);
    claim(`status ${statusFileName(id)}`, id);
    claim(`versions ${versionsDir({ inactiveDir: "/i" }, id)}`, id);
    claim(`copy ${copyPodId(id, NODE)}`, id);
    for (const file of manifestFileNames(id)) claim(`manifest ${file}`, id);
  }
  const shared = [...owners].filter(([, ids]) => ids.size > 1).map(([what]) => what);
  // Only bootkube's name of two short ids, which the clash rule resolves (manifest_names.ts).
  assertEquals(shared, ["manifest kube-system-x.json"]);
  // And the rule gives every id a file of its own, whatever it is placed with.
  const { names, blocked } = assignManifestNames(IDS, {
    inactive: new Map(),
    active: new Map(),
  });
  assertEquals(blocked, []);
  assertEquals(new Set(names.values()).size, IDS.length);
});

Deno.test("a shortened file name is never the name of an id that fits", () => {
  for (const id of IDS) {
    const [, unambiguous] = manifestFileNames(id);
    const whole = `${id.replace("/", "_")}.json`;
    if (unambiguous === whole) continue;
    // Two underscores: an unshortened name has one (`<ns>_<name>`) or none (bootkube's).
    assertEquals(unambiguous.split("_").length, 3, unambiguous);
    assert(isStatusFileName(unambiguous), unambiguous);
  }
  for (const name of ["a_b_c.json", `a_b_${"0".repeat(32)}.json`, "kube-system-x.json"]) {
    assertEquals(isStatusFileName(name), false, name);
  }
});

Deno.test("a checkpoint says the id it stands for, whatever name it carries", () => {
  for (const id of IDS) {
    const [namespace, name] = id.split("/");
    const parent: Pod = {
      metadata: { namespace, name, uid: "u1" },
      spec: { containers: [{ name: "c", image: "i" }] },
    };
    const { pod } = sanitizeCheckpoint(parent, SITE);
    assertEquals(pod.metadata.name, checkpointPodName(id, NODE));
    assertEquals(pod.metadata.annotations, { [CHECKPOINT_OF_ANNOTATION]: name });
    assertEquals(pod.metadata.ownerReferences, [
      { apiVersion: "v1", kind: "Pod", name, uid: "u1", controller: true },
    ]);
    assertEquals(checkpointIdOf(pod), id);
  }
  // A name that is not the short form of what checkpoint-of says: the pod's own id, as ever.
  const other = (name: string, of: string): Pod => ({
    metadata: { namespace: "ns", name, annotations: { [CHECKPOINT_OF_ANNOTATION]: of } },
  });
  const long = nameOf(253);
  const short = checkpointPodName(`ns/${long}`, NODE);
  assertEquals(checkpointIdOf(other(short, long)), `ns/${long}`);
  assertEquals(checkpointIdOf(other(short, `${long.slice(0, -1)}q`)), `ns/${short}`);
  assertEquals(checkpointIdOf(other("x", "y")), "ns/x");
  assertEquals(checkpointIdOf(other("x", "")), "ns/x");
  assertEquals(checkpointIdOf(other(short, "Not_A_Name")), `ns/${short}`);
  const unannotated: Pod = { metadata: { namespace: "ns", name: short } };
  assertEquals(checkpointIdOf(unannotated), podId(unannotated));
});
