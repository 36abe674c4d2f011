/** AnswerMemo: the same bytes are not parsed again; any other bytes are, and only valid answers are kept. */
import { deepStrictEqual as assertEquals, ok as assert, throws } from "node:assert/strict";
import { AnswerMemo } from "../../lib/sources/answer_memo.ts";
import { failed, type SourceResult, succeeded } from "../../lib/sources/types.ts";

function counted(memo: AnswerMemo<{ pods: string[] }>) {
  let parses = 0;
  const answer = (bytes: string | Uint8Array) =>
    memo.answer(bytes, () => {
      parses++;
      const text = typeof bytes === "string" ? bytes : new TextDecoder().decode(bytes);
      return text.startsWith("pods:")
        ? succeeded({ pods: text.slice(5).split(",") })
        : failed("kubelet", "bad-response", `not pods: ${text}`);
    });
  return { answer, parses: () => parses };
}

function value<T>(result: SourceResult<T>): T {
  if (!result.ok) throw new Error(result.failure.message);
  return result.value;
}

Deno.test("the same bytes again: the kept answer, not parsed again", () => {
  const { answer, parses } = counted(new AnswerMemo());
  const first = answer("pods:a,b");
  assertEquals(answer("pods:a,b"), first);
  assertEquals(answer(new TextEncoder().encode("pods:a,b")), first);
  assertEquals(parses(), 1);
});

Deno.test("other bytes are parsed: a change, and a change back, each give their own answer", () => {
  const { answer, parses } = counted(new AnswerMemo());
  assertEquals(value(answer("pods:a,b")).pods, ["a", "b"]);
  assertEquals(value(answer("pods:a")).pods, ["a"]);
  assertEquals(value(answer("pods:a,b")).pods, ["a", "b"]);
  assertEquals(parses(), 3);
});

Deno.test("a bad answer is parsed and fails every time, and leaves the kept answer as it was", () => {
  const { answer, parses } = counted(new AnswerMemo());
  const good = answer("pods:a");
  for (let i = 0; i < 2; i++) assertEquals(answer("<html>").ok, false);
  assertEquals(answer("pods:a"), good);
  assertEquals(parses(), 3);
});

Deno.test("the kept value is frozen all the way down: a reader cannot change a later pass's answer", () => {
  const { answer } = counted(new AnswerMemo());
  const kept = value(answer("pods:a,b"));
  assert(Object.isFrozen(kept) && Object.isFrozen(kept.pods));
  throws(() => kept.pods.push("c"), TypeError);
  assertEquals(value(answer("pods:a,b")).pods, ["a", "b"]);
});
