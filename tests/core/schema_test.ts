/** The agent's schema building blocks and their one-line messages (lib/core/schema*.ts). */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import * as v from "valibot";
import {
  check,
  int,
  looseObject,
  number,
  object,
  record,
  type Schema,
  strictObject,
} from "../../lib/core/schema.ts";
import { formatPath, formatSchemaError, isMissing } from "../../lib/core/schema_error.ts";
import { isCidr } from "../../lib/util/ip.ts";

/** The output of a value the schema accepts, or its one-line message. */
function outcome<T>(schema: Schema<T>, input: unknown): { ok: T } | { error: string } {
  const result = check(schema, input);
  return result.success
    ? { ok: result.output }
    : { error: formatSchemaError(schema, result.issues) };
}

const Doc = strictObject({
  name: v.pipe(v.string(), v.minLength(1), v.check((s) => !s.includes("/"), "must not contain /")),
  count: v.optional(v.pipe(int(), v.minValue(1), v.maxValue(9)), 3),
  ratio: v.optional(number()),
  kind: v.optional(v.literal("Thing")),
  mode: v.optional(v.picklist(["a", "b"])),
  meta: v.optional(looseObject({ labels: v.optional(record(v.string())) })),
  items: v.optional(v.array(object({ id: v.string() }))),
});

Deno.test("messages name the field and say what is wrong, as the agent always has", () => {
  const table: [unknown, string][] = [
    [[1], "document: expected object, received array"],
    [null, "document: expected object, received null"],
    [{}, "name: missing (string)"],
    [{ name: 5 }, "name: expected string, received number"],
    [{ name: "" }, "name: Too small: expected string to have >=1 characters"],
    [{ name: "a/b" }, "name: must not contain /"],
    [{ name: "a", extra: 1 }, "extra: unknown field"],
    [{ name: "a", "odd key": 1 }, '["odd key"]: unknown field'],
    [{ name: "a", count: 0 }, "count: Too small: expected number to be >=1"],
    [{ name: "a", count: 10 }, "count: Too big: expected number to be <=9"],
    [{ name: "a", count: 1.5 }, "count: expected int, received number"],
    [{ name: "a", count: "2" }, "count: expected number, received string"],
    [{ name: "a", ratio: Infinity }, "ratio: expected number, received Infinity"],
    [{ name: "a", kind: "Other" }, 'kind: expected "Thing"'],
    [{ name: "a", mode: "c" }, 'mode: Invalid option: expected one of "a"|"b"'],
    [{ name: "a", meta: [] }, "meta: expected object, received array"],
    [{ name: "a", meta: { labels: ["x"] } }, "meta.labels: expected record, received array"],
    [{ name: "a", meta: { labels: { x: 1 } } }, "meta.labels.x: expected string, received number"],
    [{ name: "a", items: [{ id: "1" }, {}] }, "items[1].id: missing (string)"],
    [{ name: "a", items: [{ id: "1" }, 2] }, "items[1]: expected object, received number"],
  ];
  for (const [input, message] of table) {
    assertEquals(outcome(Doc, input), { error: message }, JSON.stringify(input));
  }
});

Deno.test("a missing field is reported as its schema would report nothing", () => {
  const Fields = object({
    version: v.literal("v1"),
    meta: looseObject({}),
    labels: record(v.string()),
    address: v.pipe(v.string("not an address"), v.check(isCidr, "not an address")),
  });
  const missing = (field: string) => {
    const input: Record<string, unknown> = { version: "v1", meta: {}, labels: {}, address: "::/0" };
    delete input[field];
    return outcome(Fields, input);
  };
  assertEquals(missing("version"), { error: 'version: expected "v1"' });
  assertEquals(missing("meta"), { error: "meta: missing (object)" });
  assertEquals(missing("labels"), { error: "labels: missing (record)" });
  assertEquals(missing("address"), { error: "address: not an address" });
  assert(isMissing("missing (object)") && isMissing("missing") && !isMissing('expected "v1"'));
});

Deno.test("unknown keys: dropped by object, kept by looseObject, refused by strictObject", () => {
  const entries = { a: v.string() };
  const input = { a: "x", b: 1 };
  assertEquals(outcome(object(entries), input), { ok: { a: "x" } });
  assertEquals(outcome(looseObject(entries), input), { ok: { a: "x", b: 1 } });
  assertEquals(outcome(strictObject(entries), input), { error: "b: unknown field" });
});

Deno.test("defaults fill an absent field; what is accepted comes out as given", () => {
  assertEquals(outcome(Doc, { name: "a" }), { ok: { name: "a", count: 3 } });
  const full = {
    name: "a",
    count: 2,
    ratio: 0.5,
    kind: "Thing",
    mode: "b",
    meta: { labels: { x: "y" }, other: [1] },
    items: [{ id: "1" }],
  };
  assertEquals(outcome(Doc, full), { ok: full });
});

Deno.test("paths: identifiers dotted, indexes and other keys bracketed", () => {
  assertEquals(formatPath(["items", 0, "metadata", "name"]), "items[0].metadata.name");
  assertEquals(formatPath(["state", "ns/a", "graceEnd"]), 'state["ns/a"].graceEnd');
  assertEquals(formatPath([]), "");
});

Deno.test("CIDR: IPv4 dotted decimal without leading zeros, IPv6 as a URL host, a prefix in range", () => {
  for (const good of ["10.244.0.5/24", "0.0.0.0/0", "fd00::5/64", "::1/128", "::ffff:1.2.3.4/96"]) {
    assertEquals(isCidr(good), true, good);
  }
  for (
    const bad of [
      "10.244.0.5",
      "10.244.0.05/24",
      "10.0.0.1/33",
      "fd00::5/129",
      "fd00::5/064",
      "x/1",
      "fd00::5/6/4",
      "/24",
      "fe80::1%eth0/64",
    ]
  ) {
    assertEquals(isCidr(bad), false, bad);
  }
});

Deno.test("keys named constructor and prototype are kept and checked; __proto__ is dropped", () => {
  const Meta = looseObject({ labels: record(v.string()) });
  const input = JSON.parse(
    '{"a":1,"constructor":2,"labels":{"constructor":"x","__proto__":"y","prototype":"z"},"prototype":3,"__proto__":4}',
  );
  const out = outcome(Meta, input);
  assertEquals(
    JSON.stringify("ok" in out && out.ok),
    '{"labels":{"constructor":"x","prototype":"z"},"a":1,"constructor":2,"prototype":3}',
  );
  assertEquals(outcome(Meta, { labels: { prototype: 5 } }), {
    error: "labels.prototype: expected string, received number",
  });
  assertEquals(outcome(strictObject({}), JSON.parse('{"__proto__":1}')), {
    error: "__proto__: unknown field",
  });
  assertEquals(outcome(strictObject({}), { constructor: 1 }), {
    error: "constructor: unknown field",
  });
});
