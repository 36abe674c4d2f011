/**
 * Snapshot documents for the plan contract: a valid one to start from, and bad ones with the
 * field each error must name. The same documents are fed to the parser in-process
 * (tests/core/snapshot_test.ts) and to `ckpt-agent plan` (tests/commands/plan_test.ts).
 */

export function snapshot(extra: Record<string, unknown> = {}) {
  return {
    now: "2026-01-01T00:00:00Z",
    apiAvailable: true,
    localRunning: [],
    localParents: [],
    apiParents: [],
    activeCheckpoints: [],
    inactiveCheckpoints: [],
    ...extra,
  };
}

/** Label, document text, and the field its one-line error names. */
export const BAD_SNAPSHOTS: [string, string, string][] = [
  ["not JSON", "{", "not JSON"],
  ["a JSON array", "[]", "document"],
  ...["now", "apiAvailable", "localRunning", "localParents", "apiParents", "activeCheckpoints"]
    .map((field): [string, string, string] => {
      const doc: Record<string, unknown> = snapshot();
      delete doc[field];
      return [`missing ${field}`, JSON.stringify(doc), field];
    }),
  [
    "missing inactiveCheckpoints",
    JSON.stringify({ ...snapshot(), inactiveCheckpoints: undefined }),
    "inactiveCheckpoints",
  ],
  ["now not RFC 3339", JSON.stringify(snapshot({ now: "2026-01-01 00:00" })), "now"],
  ["now a number", JSON.stringify(snapshot({ now: 1767225600 })), "now"],
  ["apiAvailable a string", JSON.stringify(snapshot({ apiAvailable: "yes" })), "apiAvailable"],
  [
    "runtimeAvailable a number",
    JSON.stringify(snapshot({ runtimeAvailable: 1 })),
    "runtimeAvailable",
  ],
  [
    "kubeletAvailable null",
    JSON.stringify(snapshot({ kubeletAvailable: null })),
    "kubeletAvailable",
  ],
  [
    "gracePeriodSeconds a string",
    JSON.stringify(snapshot({ gracePeriodSeconds: "60" })),
    "gracePeriodSeconds",
  ],
  [
    "gracePeriodSeconds negative",
    JSON.stringify(snapshot({ gracePeriodSeconds: -1 })),
    "gracePeriodSeconds",
  ],
  [
    "gracePeriodSeconds absurdly large",
    JSON.stringify(snapshot({ gracePeriodSeconds: 1e300 })),
    "gracePeriodSeconds",
  ],
  [
    "a deadline after the year 9999",
    JSON.stringify(snapshot({ now: "9999-12-31T23:59:00Z", gracePeriodSeconds: 120 })),
    "gracePeriodSeconds",
  ],
  ["localRunning an object", JSON.stringify(snapshot({ localRunning: {} })), "localRunning"],
  [
    "a crash-looping parent's kept version not a version",
    JSON.stringify(snapshot({ crashLooping: { "ns/a": 0 } })),
    'crashLooping["ns/a"]',
  ],
  [
    "a superseded checkpoint not namespace/name",
    JSON.stringify(snapshot({ superseded: ["nope"] })),
    "superseded[0]",
  ],
  [
    "a pod without a name",
    JSON.stringify(snapshot({ apiParents: [{ metadata: { namespace: "ns" } }] })),
    "apiParents[0].metadata.name",
  ],
  [
    "a pod name with a slash",
    JSON.stringify(snapshot({ localRunning: [{ metadata: { namespace: "ns", name: "a/b" } }] })),
    "localRunning[0].metadata.name",
  ],
  [
    "annotations not strings",
    JSON.stringify(
      snapshot({
        localParents: [{ metadata: { name: "a", namespace: "b", annotations: { x: true } } }],
      }),
    ),
    "localParents[0].metadata.annotations.x",
  ],
  ["self incomplete", JSON.stringify(snapshot({ self: { nodeName: "n1" } })), "self.podName"],
  [
    "unknown state name",
    JSON.stringify(snapshot({ state: { "ns/a": { state: "running" } } })),
    'state["ns/a"].state',
  ],
  [
    "remove in state",
    JSON.stringify(snapshot({ state: { "ns/a": { state: "remove" } } })),
    'state["ns/a"].state',
  ],
  [
    "grace state without graceEnd",
    JSON.stringify(snapshot({ state: { "ns/a": { state: "inactive-grace" } } })),
    'state["ns/a"].graceEnd',
  ],
  [
    "graceEnd not RFC 3339",
    JSON.stringify(snapshot({ state: { "ns/a": { state: "active-grace", graceEnd: "soon" } } })),
    'state["ns/a"].graceEnd',
  ],
  [
    "graceEnd on a state without a deadline",
    JSON.stringify(
      snapshot({ state: { "ns/a": { state: "active", graceEnd: "2026-01-01T00:00:00Z" } } }),
    ),
    'state["ns/a"].graceEnd',
  ],
  [
    "state key not namespace/name",
    JSON.stringify(snapshot({ state: { "a": { state: "active" } } })),
    "state",
  ],
  ["state not an object", JSON.stringify(snapshot({ state: [] })), "state"],
  ["an unknown field", JSON.stringify(snapshot({ apiAvialable: true })), "apiAvialable"],
  ["namespaces empty", JSON.stringify(snapshot({ namespaces: [] })), "namespaces"],
  [
    "namespaces with * beside a name",
    JSON.stringify(snapshot({ namespaces: ["kube-system", "*"] })),
    "namespaces",
  ],
  ["namespaces not names", JSON.stringify(snapshot({ namespaces: ["Kube"] })), "namespaces"],
  [
    "kubeletVerified a string",
    JSON.stringify(snapshot({ kubeletVerified: "no" })),
    "kubeletVerified",
  ],
];
