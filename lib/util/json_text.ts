/**
 * JSON text of plain data at any depth, as a Go server encodes what it stores. V8's
 * JSON.stringify recurses on its slow path (indentation, a replacer, numeric keys) and throws a
 * RangeError a few thousand levels down; then a loop of our own writes it, compact: a pod nested
 * 100,000 levels deep still goes over the simulated peers' wire (tests/pass/deep_objects_test.ts)
 * and into `ckpt-agent snapshot`.
 */

/** An object or array being written: its entries (a key for an object's) and the next one. */
interface Open {
  entries: [string | undefined, unknown][];
  next: number;
  close: string;
}

export function jsonText(value: unknown, indent?: number): string {
  try {
    return JSON.stringify(value, null, indent);
  } catch (e) {
    if (!(e instanceof RangeError)) throw e;
  }
  const out: string[] = [];
  const stack: Open[] = [];
  const write = (value: unknown) => {
    if (Array.isArray(value)) {
      out.push("[");
      stack.push({ entries: value.map((v) => [undefined, v]), next: 0, close: "]" });
    } else if (typeof value === "object" && value !== null) {
      out.push("{");
      const entries = Object.entries(value).filter(([, v]) => v !== undefined);
      stack.push({ entries, next: 0, close: "}" });
    } else {
      // As JSON.stringify writes an array's undefined.
      out.push(JSON.stringify(value) ?? "null");
    }
  };
  write(value);
  while (stack.length > 0) {
    const open = stack.at(-1)!;
    if (open.next === open.entries.length) {
      out.push(open.close);
      stack.pop();
      continue;
    }
    const [key, inner] = open.entries[open.next++];
    if (open.next > 1) out.push(",");
    if (key !== undefined) out.push(JSON.stringify(key), ":");
    write(inner);
  }
  return out.join("");
}
