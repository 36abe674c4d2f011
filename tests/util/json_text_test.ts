/** JSON text at any depth: what JSON.stringify writes, and where it gives up, a loop's own. */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { nestsDeeperThan } from "../../lib/core/json.ts";
import { jsonText } from "../../lib/util/json_text.ts";

/** `{"1": {"1": … value …}}`: numeric keys put JSON.stringify on its recursive path. */
function nested(depth: number, value: unknown): unknown {
  for (let i = 0; i < depth; i++) value = { "1": value };
  return value;
}

/** Every kind of JSON value, and what JSON.stringify leaves out or writes as null. */
const SAMPLE = {
  s: 'quote " and \\ and \n é',
  n: [0, -1.5, 1e21, null, true, false, undefined],
  gone: undefined,
  o: { "": {}, a: [] },
};

Deno.test("what JSON.stringify can write, it writes, indentation included", () => {
  assertEquals(jsonText(SAMPLE), JSON.stringify(SAMPLE));
  assertEquals(jsonText(SAMPLE, 2), JSON.stringify(SAMPLE, null, 2));
});

Deno.test("past JSON.stringify's depth: the same data, compact, read back whole", () => {
  const deep = nested(100_000, SAMPLE);
  let threw = false;
  try {
    JSON.stringify(deep);
  } catch (e) {
    threw = e instanceof RangeError;
  }
  assertEquals(threw, true, "JSON.stringify writes it: the test proves nothing");
  const text = jsonText(deep, 2);
  assertEquals(text.startsWith('{"1":{"1":'), true);
  let back = JSON.parse(text);
  assertEquals(nestsDeeperThan(back, 100_000), true);
  assertEquals(nestsDeeperThan(back, 100_003), false);
  for (let i = 0; i < 100_000; i++) back = back["1"];
  assertEquals(back, JSON.parse(JSON.stringify(SAMPLE)));
});

Deno.test("nestsDeeperThan counts objects and arrays, not what is in them", () => {
  assertEquals(nestsDeeperThan("text", 0), false);
  assertEquals(nestsDeeperThan({}, 0), true);
  assertEquals(nestsDeeperThan({ a: [{}] }, 2), true);
  assertEquals(nestsDeeperThan({ a: [{}] }, 3), false);
  assertEquals(nestsDeeperThan({ a: [1, "x", null] }, 2), false);
});
