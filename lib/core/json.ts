/** Reading loose JSON objects (pods are kept as they came, unknown fields included). */

export type Json = Record<string, unknown>;

export function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The objects of an array; anything else reads as an empty list. */
export function asArray(value: unknown): Json[] {
  return Array.isArray(value) ? value.filter(isObject) : [];
}
