/**
 * A source's last answer that parsed and validated, with the bytes it came from. A peer at rest
 * answers every poll with the same bytes: those are the same answer, and are not decoded, parsed
 * or validated again. Only a valid answer is kept, so any other answer is parsed and fails as it
 * always would. The kept value is frozen: a reader that changed it would change what every later
 * pass gets, and now throws instead.
 *
 * A body read as it arrives (`read`) is compared with the kept bytes chunk by chunk, and nothing
 * of it is kept while it matches: an answer at rest leaves only its chunks, which die young. Kept
 * until the end (as text to hash, or as buffers), a kubelet's 6 MB /pods at 1,000 parents
 * outlived V8's young generation every poll, and the collections of the old one that this
 * caused were most of the daemon's CPU at rest (docs/benchmarks.md, "Answers compared as they
 * arrive").
 */
import { deepFreeze } from "../util/frozen.ts";
import { equalBytes } from "../util/bytes.ts";
import type { SourceResult } from "./types.ts";

export class AnswerMemo<T> {
  #bytes: Uint8Array | undefined;
  #result: SourceResult<T> | undefined;

  /** What `bytes` mean: the kept answer if they are the ones it came from, else `parse()`. */
  answer(bytes: Uint8Array, parse: () => SourceResult<T>): SourceResult<T> {
    if (this.#result !== undefined && equalBytes(bytes, this.#bytes!)) return this.#result;
    return this.#keep(bytes, parse());
  }

  /** Starts reading a body as it arrives (AnswerRead). */
  read(): AnswerRead<T> {
    return new AnswerRead(this.#bytes, this.#result, (bytes, result) => this.#keep(bytes, result));
  }

  #keep(bytes: Uint8Array | (() => Uint8Array), result: SourceResult<T>): SourceResult<T> {
    if (!result.ok) return result;
    deepFreeze(result.value);
    this.#bytes = typeof bytes === "function" ? bytes() : bytes;
    this.#result = result;
    return result;
  }
}

/**
 * One body, chunk by chunk: `take` says which bytes the reader must decode (none while they are
 * the kept answer's), `rest` what it must decode before it uses the text it has, and `kept` at
 * the end whether the body was the kept answer's bytes exactly.
 */
export class AnswerRead<T> {
  readonly #bytes: Uint8Array | undefined;
  readonly #result: SourceResult<T> | undefined;
  readonly #keep: (bytes: () => Uint8Array, result: SourceResult<T>) => SourceResult<T>;
  /** How many of the kept bytes the body has matched, while it still does. */
  #matched = 0;
  #differs: boolean;

  constructor(
    bytes: Uint8Array | undefined,
    result: SourceResult<T> | undefined,
    keep: (bytes: () => Uint8Array, result: SourceResult<T>) => SourceResult<T>,
  ) {
    this.#bytes = bytes;
    this.#result = result;
    this.#keep = keep;
    this.#differs = bytes === undefined;
  }

  /** The bytes to decode now that `chunk` came: none while the body is the kept one's so far. */
  take(chunk: Uint8Array): Uint8Array[] {
    if (this.#differs) return [chunk];
    const bytes = this.#bytes!;
    const end = this.#matched + chunk.length;
    if (end <= bytes.length && equalBytes(chunk, bytes.subarray(this.#matched, end))) {
      this.#matched = end;
      return [];
    }
    return [...this.rest(), chunk];
  }

  /** The bytes matched so far and not decoded (the body as read is wanted as text). */
  rest(): Uint8Array[] {
    if (this.#differs) return [];
    this.#differs = true;
    return [this.#bytes!.subarray(0, this.#matched)];
  }

  /** At the body's end: the kept answer, if the body was its bytes exactly. */
  kept(): SourceResult<T> | undefined {
    return !this.#differs && this.#matched === this.#bytes!.length ? this.#result : undefined;
  }

  /**
   * What the body's text means: `parse()`, kept (with the text's bytes) if valid. The text is
   * the body decoded as UTF-8; a body that was not valid UTF-8 is kept as the text's bytes, and
   * the same body again is then parsed again, as it would have been without a memo.
   */
  answer(text: string, parse: () => SourceResult<T>): SourceResult<T> {
    return this.#keep(() => new TextEncoder().encode(text), parse());
  }
}
