/**
 * A source's last answer that parsed and validated, with a digest of the bytes it came from. A
 * peer at rest answers every poll with the same bytes: those are the same answer, and are not
 * parsed and validated again. Only a valid answer is kept, so any other answer is parsed and
 * fails as it always would. The kept value is frozen: a reader that changed it would change
 * what every later pass gets, and now throws instead.
 */
import { createHash } from "node:crypto";
import { deepFreeze } from "../util/frozen.ts";
import type { SourceResult } from "./types.ts";

export class AnswerMemo<T> {
  #digest: string | undefined;
  #result: SourceResult<T> | undefined;

  /** What `bytes` mean: the kept answer if they are the ones it came from, else `parse()`. */
  answer(bytes: string | Uint8Array, parse: () => SourceResult<T>): SourceResult<T> {
    const digest = createHash("sha256").update(bytes).digest("base64");
    if (this.#result !== undefined && digest === this.#digest) return this.#result;
    const result = parse();
    if (result.ok) {
      deepFreeze(result.value);
      this.#digest = digest;
      this.#result = result;
    }
    return result;
  }
}
