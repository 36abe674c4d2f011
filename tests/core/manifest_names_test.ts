/** The manifest file name rule, by table: ids to place + what the directories hold → names. */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { manifestFileNames } from "../../lib/core/checkpoint_layout.ts";
import {
  assignManifestNames,
  filesHolding,
  type ManifestIndex,
} from "../../lib/core/manifest_names.ts";

/** file → the id of the checkpoint it holds; null: a foreign pod or a file that is not a pod. */
type Dir = Record<string, string | null>;

function index(dir: Dir = {}): ManifestIndex {
  return new Map(Object.entries(dir).map(([file, id]) => [file, id ?? undefined]));
}

interface Case {
  name: string;
  place: string[];
  inactive?: Dir;
  active?: Dir;
  names: Record<string, string>;
  clashes?: Record<string, string>;
  blocked?: Record<string, string>;
}

const A = "kube-system/x", B = "kube/system-x";
/** An id too long for either name: one shortened name for both (checkpoint_layout.ts). */
const LONG = `${"n".repeat(63)}/${"a".repeat(253)}`;
const [SHORT] = manifestFileNames(LONG);

const CASES: Case[] = [
  {
    name: "no clash: bootkube's name",
    place: ["kube-system/kube-apiserver"],
    names: { "kube-system/kube-apiserver": "kube-system-kube-apiserver.json" },
  },
  {
    name: "two new clashing ids: the first in id order gets bootkube's name",
    place: [B, A],
    names: { [A]: "kube-system-x.json", [B]: "kube_system-x.json" },
    clashes: { [B]: "kube-system-x.json is held by the checkpoint of kube-system/x" },
  },
  {
    name: "the same, placed in the other order",
    place: [A, B],
    names: { [A]: "kube-system-x.json", [B]: "kube_system-x.json" },
    clashes: { [B]: "kube-system-x.json is held by the checkpoint of kube-system/x" },
  },
  {
    name: "sticky: the id that has bootkube's name on disk keeps it, though it sorts later",
    place: [A, B],
    inactive: { "kube-system-x.json": B },
    names: { [B]: "kube-system-x.json", [A]: "kube-system_x.json" },
    clashes: { [A]: "kube-system-x.json is held by the checkpoint of kube/system-x" },
  },
  {
    name: "sticky: both on disk, nothing changes and nothing is said",
    place: [A, B],
    inactive: { "kube-system-x.json": B, "kube-system_x.json": A },
    active: { "kube-system_x.json": A },
    names: { [B]: "kube-system-x.json", [A]: "kube-system_x.json" },
  },
  {
    name: "sticky unambiguous name, though bootkube's is free again",
    place: [A],
    inactive: { "kube-system_x.json": A },
    names: { [A]: "kube-system_x.json" },
  },
  {
    name: "only an active copy on disk: its name is kept",
    place: [A],
    active: { "kube-system_x.json": A },
    names: { [A]: "kube-system_x.json" },
  },
  {
    name: "checkpoints on disk that are not placed this pass keep their names",
    place: [],
    inactive: { "a-b.json": "a/b", "c_d.json": "c/d" },
    names: { "a/b": "a-b.json", "c/d": "c_d.json" },
  },
  {
    name: "a foreign file in the static-pod dir holds bootkube's name",
    place: [A],
    active: { "kube-system-x.json": null },
    names: { [A]: "kube-system_x.json" },
    clashes: {
      [A]: "kube-system-x.json is held by a file that is not a checkpoint in the static-pod dir",
    },
  },
  {
    name: "an unparsable file in the inactive dir holds bootkube's name",
    place: [A],
    inactive: { "kube-system-x.json": null },
    names: { [A]: "kube-system_x.json" },
    clashes: {
      [A]: "kube-system-x.json is held by a file that is not a checkpoint in the inactive dir",
    },
  },
  {
    name: "a checkpoint under a name that is not its own holds that name for everyone else",
    place: [A],
    active: { "kube-system-x.json": "other/pod" },
    names: { [A]: "kube-system_x.json" },
    clashes: {
      [A]: "kube-system-x.json is held by the checkpoint of other/pod in the static-pod dir",
    },
  },
  {
    name: "both names held by other files: no name, and why",
    place: [A],
    inactive: { "kube-system-x.json": B },
    active: { "kube-system_x.json": null },
    names: { [B]: "kube-system-x.json" },
    blocked: {
      [A]:
        "kube-system-x.json is held by the checkpoint of kube/system-x, and kube-system_x.json " +
        "by a file that is not a checkpoint in the static-pod dir",
    },
  },
  {
    name: "a name claimed in both directories goes to the inactive dir's checkpoint",
    place: [A, B],
    inactive: { "kube-system-x.json": B },
    active: { "kube-system-x.json": A },
    names: { [B]: "kube-system-x.json", [A]: "kube-system_x.json" },
    clashes: { [A]: "kube-system-x.json is held by the checkpoint of kube/system-x" },
  },
  {
    name: "one id under both names in one directory: bootkube's is its name",
    place: [A],
    inactive: { "kube-system-x.json": A, "kube-system_x.json": A },
    names: { [A]: "kube-system-x.json" },
  },
  {
    name: "an active copy under the other name does not move the inactive one",
    place: [A],
    inactive: { "kube-system_x.json": A },
    active: { "kube-system-x.json": A },
    names: { [A]: "kube-system_x.json" },
  },
  {
    name: "a long id gets its shortened name, and keeps it",
    place: [LONG, A],
    inactive: { "kube-system-x.json": A },
    names: { [LONG]: SHORT, [A]: "kube-system-x.json" },
  },
  {
    name: "a long id whose only name another file holds: no name, and why, said once",
    place: [LONG],
    active: { [SHORT]: null },
    names: {},
    blocked: {
      [LONG]: `${SHORT} is held by a file that is not a checkpoint in the static-pod dir`,
    },
  },
  {
    name: "invalid ids get no name, on disk or placed",
    place: ["Kube/X", "a/b/c", "a/.."],
    inactive: { "Kube-X.json": "Kube/X" },
    names: {},
  },
  {
    name: "three ids, one bootkube name: one keeps it, the others get their own",
    place: ["a-b/c", "a/b-c", "a-b-c/x"],
    inactive: { "a-b-c.json": null },
    names: { "a-b/c": "a-b_c.json", "a/b-c": "a_b-c.json", "a-b-c/x": "a-b-c-x.json" },
    clashes: {
      "a-b/c": "a-b-c.json is held by a file that is not a checkpoint in the inactive dir",
      "a/b-c": "a-b-c.json is held by a file that is not a checkpoint in the inactive dir",
    },
  },
];

for (const c of CASES) {
  Deno.test(`manifest names: ${c.name}`, () => {
    const got = assignManifestNames(c.place, {
      inactive: index(c.inactive),
      active: index(c.active),
    });
    assertEquals(Object.fromEntries(got.names), c.names);
    assertEquals(
      Object.fromEntries(got.clashes.map((x) => [x.id, x.reason])),
      c.clashes ?? {},
    );
    for (const clash of got.clashes) assertEquals(clash.file, c.names[clash.id]);
    assertEquals(Object.fromEntries(got.blocked.map((x) => [x.id, x.reason])), c.blocked ?? {});
    // No two ids ever share a file.
    const files = [...got.names.values()];
    assertEquals(new Set(files).size, files.length);
  });
}

Deno.test("manifest names: the outcome does not depend on the order of ids or of files", () => {
  const inactive = { "a-b-c.json": "a/b-c", "z-y.json": null, "kube-system_x.json": A };
  const place = ["a-b/c", "a/b-c", A, B, "z/y", "q/r"];
  const expected = assignManifestNames(place, { inactive: index(inactive), active: index() });
  const files = Object.entries(inactive);
  for (let i = 0; i < place.length; i++) {
    const rotated = [...place.slice(i), ...place.slice(0, i)];
    for (const ids of [rotated, [...rotated].reverse()]) {
      for (const order of [files, [...files].reverse()]) {
        const got = assignManifestNames(ids, {
          inactive: index(Object.fromEntries(order)),
          active: index(),
        });
        assertEquals(got, expected);
      }
    }
  }
});

Deno.test("files holding an id: its own names only, bootkube's first", () => {
  const dir = index({
    "kube-system_x.json": A,
    "kube-system-x.json": A,
    "elsewhere.json": A,
    "kube_system-x.json": null,
  });
  assertEquals(filesHolding(dir, A), ["kube-system-x.json", "kube-system_x.json"]);
  assertEquals(filesHolding(dir, B), []);
  assertEquals(filesHolding(dir, "a/b/c"), []);
});
