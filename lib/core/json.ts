/** Reading loose JSON objects (pods are kept as they came, unknown fields included). */

export type Json = Record<string, unknown>;

export function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The objects of an array; anything else reads as an empty list. */
export function asArray(value: unknown): Json[] {
  return Array.isArray(value) ? value.filter(isObject) : [];
}

/**
 * Whether `value` nests objects and arrays more than `limit` levels deep. Walked with a stack of
 * its own: a value from a peer may nest deeper than the call stack goes.
 */
export function nestsDeeperThan(value: unknown, limit: number): boolean {
  const values = [value];
  const depths = [0];
  while (values.length > 0) {
    const next = values.pop();
    const depth = depths.pop()!;
    if (typeof next !== "object" || next === null) continue;
    if (depth === limit) return true;
    for (const inner of Object.values(next)) {
      values.push(inner);
      depths.push(depth + 1);
    }
  }
  return false;
}
