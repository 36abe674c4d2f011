/**
 * AnswerMemo: the same bytes are not parsed again, whether given whole or read chunk by chunk in
 * any cut; any other bytes are, from exactly their text; only valid answers are kept.
 */
import { deepStrictEqual as assertEquals, ok as assert, throws } from "node:assert/strict";
import { AnswerMemo } from "../../lib/sources/answer_memo.ts";
import { failed, type SourceResult, succeeded } from "../../lib/sources/types.ts";

type Pods = { pods: string[] };
const encode = (text: string) => new TextEncoder().encode(text);

function parser() {
  const texts: string[] = [];
  const parse = (text: string) => (): SourceResult<Pods> => {
    texts.push(text);
    return text.startsWith("pods:")
      ? succeeded({ pods: text.slice(5).split(",") })
      : failed("kubelet", "bad-response", `not pods: ${text}`);
  };
  return { parse, texts };
}

/** A memo asked with whole bodies. */
function whole(memo = new AnswerMemo<Pods>()) {
  const { parse, texts } = parser();
  const answer = (text: string) => memo.answer(encode(text), parse(text));
  return { answer, parses: () => texts.length };
}

/** A memo read as http.ts reads it: chunks of `cut` bytes, each decoded only if `take` says. */
function streamed(memo = new AnswerMemo<Pods>()) {
  const { parse, texts } = parser();
  const answer = (text: string, cut: number) => {
    const bytes = encode(text);
    const read = memo.read();
    const decoder = new TextDecoder();
    let decoded = "";
    const decode = (parts: Uint8Array[]) => {
      for (const p of parts) decoded += decoder.decode(p, { stream: true });
    };
    for (let at = 0; at < bytes.length; at += cut) decode(read.take(bytes.subarray(at, at + cut)));
    const kept = read.kept();
    if (kept !== undefined) return kept;
    decode(read.rest());
    decoded += decoder.decode();
    return read.answer(decoded, parse(decoded));
  };
  return { answer, texts };
}

function value<T>(result: SourceResult<T>): T {
  if (!result.ok) throw new Error(result.failure.message);
  return result.value;
}

Deno.test("the same bytes again: the kept answer, not parsed again", () => {
  const { answer, parses } = whole();
  const first = answer("pods:a,b");
  assertEquals(answer("pods:a,b"), first);
  assertEquals(parses(), 1);
});

Deno.test("other bytes are parsed: a change, and a change back, each give their own answer", () => {
  const { answer, parses } = whole();
  assertEquals(value(answer("pods:a,b")).pods, ["a", "b"]);
  assertEquals(value(answer("pods:a")).pods, ["a"]);
  assertEquals(value(answer("pods:a,b")).pods, ["a", "b"]);
  assertEquals(parses(), 3);
});

Deno.test("a bad answer is parsed and fails every time, and leaves the kept answer as it was", () => {
  const { answer, parses } = whole();
  const good = answer("pods:a");
  for (let i = 0; i < 2; i++) assertEquals(answer("<html>").ok, false);
  assertEquals(answer("pods:a"), good);
  assertEquals(parses(), 3);
});

Deno.test("the kept value is frozen all the way down: a reader cannot change a later pass's answer", () => {
  const { answer } = whole();
  const kept = value(answer("pods:a,b"));
  assert(Object.isFrozen(kept) && Object.isFrozen(kept.pods));
  throws(() => kept.pods.push("c"), TypeError);
  assertEquals(value(answer("pods:a,b")).pods, ["a", "b"]);
});

Deno.test("read in chunks: the same body in any cut is the kept answer, nothing decoded", () => {
  const memo = new AnswerMemo<Pods>();
  const { answer, texts } = streamed(memo);
  const body = "pods:é,b,c,dddd";
  const first = answer(body, 4);
  for (const cut of [1, 3, 7, body.length, 100]) assertEquals(answer(body, cut), first);
  // Given whole, the same bytes are the same answer too.
  assertEquals(memo.answer(encode(body), () => failed("kubelet", "bad-response", "parsed")), first);
  assertEquals(texts, [body]);
});

Deno.test("read in chunks: a body that differs anywhere is parsed from exactly its text", () => {
  const { answer, texts } = streamed();
  const base = "pods:aé,bb,cc";
  answer(base, 3);
  const others = [
    "pods:aé,bb,cx", // the last byte
    "pods:aé,bb,cc,dd", // longer: every kept byte matched, then more
    "pods:aé,bb", // shorter: the body ends inside the kept bytes
    "qods:aé,bb,cc", // the first byte
    "pods:aè,bb,cc", // inside a character cut across chunks
  ];
  for (const text of others) {
    for (const cut of [1, 2, 5, 64]) {
      const result = answer(text, cut);
      assertEquals(texts.at(-1), text);
      if (text.startsWith("pods:")) assertEquals(value(result).pods, text.slice(5).split(","));
      answer(base, cut); // back to the base, kept again
    }
  }
});

Deno.test("read in chunks: a bad body is parsed every time and leaves the kept answer", () => {
  const { answer, texts } = streamed();
  const good = answer("pods:a", 2);
  assertEquals(answer("<html>", 2).ok, false);
  assertEquals(answer("<html>", 2).ok, false);
  assertEquals(answer("pods:a", 3), good);
  assertEquals(texts, ["pods:a", "<html>", "<html>"]);
});

Deno.test("read in chunks: a body that is not UTF-8 is parsed again each time, never mistaken", () => {
  const memo = new AnswerMemo<Pods>();
  const { parse, texts } = parser();
  const bytes = new Uint8Array([...encode("pods:a"), 0xff]);
  const readAll = () => {
    const read = memo.read();
    const decoder = new TextDecoder();
    let text = "";
    for (const p of read.take(bytes)) text += decoder.decode(p, { stream: true });
    const kept = read.kept();
    if (kept !== undefined) return kept;
    for (const p of read.rest()) text += decoder.decode(p, { stream: true });
    text += decoder.decode();
    return read.answer(text, parse(text));
  };
  const first = value(readAll());
  assertEquals(first.pods, ["a\ufffd"]);
  assertEquals(value(readAll()).pods, ["a\ufffd"]);
  assertEquals(texts.length, 2);
});
