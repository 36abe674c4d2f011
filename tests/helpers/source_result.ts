import type { SourceResult } from "../../lib/sources/types.ts";

/** The value of a result that must have succeeded; its failure's message otherwise. */
export function value<T>(result: SourceResult<T>): T {
  if (!result.ok) throw new Error(`expected a value, got: ${result.failure.message}`);
  return result.value;
}
