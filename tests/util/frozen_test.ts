/** Values frozen whole: nothing in them can change, and only deepFreeze's own count as whole. */
import { deepStrictEqual as assertEquals, throws as assertThrows } from "node:assert/strict";
import { deepFreeze, isFrozenWhole } from "../../lib/util/frozen.ts";

Deno.test("a value frozen whole cannot be changed anywhere inside, and says so", () => {
  const pod = { metadata: { name: "etcd", labels: { tier: "control-plane" } }, spec: { x: [1] } };
  assertEquals(deepFreeze(pod), pod);
  assertEquals(isFrozenWhole(pod), true);
  assertThrows(() => (pod.metadata.labels.tier = "other"), TypeError);
  assertThrows(() => pod.spec.x.push(2), TypeError);
  assertEquals(pod, {
    metadata: { name: "etcd", labels: { tier: "control-plane" } },
    spec: { x: [1] },
  });
});

Deno.test("a value frozen by other means, or only at its top, is not frozen whole until deepFreeze", () => {
  const shallow = Object.freeze({ metadata: { name: "etcd" } });
  assertEquals(isFrozenWhole(shallow), false);
  // Made whole, inside too.
  deepFreeze(shallow);
  assertEquals(isFrozenWhole(shallow), true);
  assertThrows(() => (shallow.metadata.name = "other"), TypeError);
  assertEquals(isFrozenWhole({}), false);
  assertEquals(isFrozenWhole("text"), false);
  assertEquals(isFrozenWhole(null), false);
});

Deno.test("a value nested deeper than the call stack goes is frozen whole all the same", () => {
  const bottom = { name: "bottom" };
  let value: unknown = bottom;
  for (let i = 0; i < 200_000; i++) value = { "1": value };
  deepFreeze(value);
  assertEquals(isFrozenWhole(value), true);
  assertThrows(() => (bottom.name = "other"), TypeError);
});
