/**
 * Values frozen whole: nothing can change them any more, and a reader that tries throws. What
 * is derived from one (its JSON, a digest) can then be kept by the value's identity.
 */
const frozenWhole = new WeakSet<object>();

/**
 * Freezes `value` and everything in it, down to what is already frozen whole. With a stack of
 * its own, not recursion: a value from a peer may nest deeper than the call stack goes
 * (tests/pass/deep_objects_test.ts).
 */
function freezeAll(value: unknown) {
  const left = [value];
  while (left.length > 0) {
    const next = left.pop();
    if (typeof next !== "object" || next === null || frozenWhole.has(next)) continue;
    Object.freeze(next);
    for (const inner of Object.values(next)) left.push(inner);
  }
}

/** `value`, frozen whole (plain data: objects, arrays, primitives). */
export function deepFreeze<T>(value: T): T {
  if (typeof value !== "object" || value === null) return value;
  freezeAll(value);
  frozenWhole.add(value);
  return value;
}

/** Whether `value` went through deepFreeze. */
export function isFrozenWhole(value: unknown): boolean {
  return typeof value === "object" && value !== null && frozenWhole.has(value);
}
