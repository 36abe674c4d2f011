/** Keys ↔ file names: one-to-one, and never a path outside the store. */
import { deepStrictEqual as assertEquals, throws } from "node:assert/strict";
import {
  InvalidIdError,
  sandboxFileName,
  sandboxIdOfFileName,
  statusFileName,
  statusIdOfFileName,
} from "../../lib/store/layout.ts";

Deno.test("status ids map to <namespace>_<name>.json and back", () => {
  for (const id of ["kube-system/kube-apiserver", "a/b.c-d", "x/y"]) {
    const name = statusFileName(id);
    assertEquals(statusIdOfFileName(name), id);
  }
  assertEquals(statusFileName("kube-system/etcd.node-1"), "kube-system_etcd.node-1.json");
});

Deno.test("status ids that are not namespace/name with valid names are refused", () => {
  for (const id of ["", "a", "a/b/c", "../b", "a/..", "A/b", "a_b/c", "ns/.hidden", "ns/x y"]) {
    throws(() => statusFileName(id), InvalidIdError, id);
  }
});

Deno.test("a valid id whose file name would exceed 255 bytes is refused, clearly", () => {
  const name = Array.from({ length: 4 }, () => "n".repeat(62)).join("."); // 251 characters
  throws(() => statusFileName(`ns/${name}`), /would exceed 255 bytes/);
  assertEquals(statusFileName(`ns/${name.slice(0, 245)}`).length, 3 + 245 + 5);
});

Deno.test("file names that are not status records map to no id", () => {
  for (const name of ["ns_a", "ns_a.txt", "ns.json", "a_b_c.json", "NS_a.json", "_a.json"]) {
    assertEquals(statusIdOfFileName(name), undefined, name);
  }
});

Deno.test("sandbox ids: hex digests and the like; never a separator, .. or a leading dot", () => {
  const digest = "0123456789abcdef".repeat(4);
  assertEquals(sandboxFileName(digest), `${digest}.json`);
  assertEquals(sandboxIdOfFileName(`${digest}.json`), digest);
  assertEquals(sandboxFileName("pod_sandbox-1.a"), "pod_sandbox-1.a.json");
  const bad: [string, RegExp][] = [
    ["", /empty/],
    ["a/b", /only letters/],
    ["a\\b", /only letters/],
    ["..", /contains \.\./],
    ["a..b", /contains \.\./],
    [".hidden", /only letters/],
    ["-flag", /only letters/],
    ["a\0b", /only letters/],
    ["x".repeat(129), /longer than 128/],
  ];
  for (const [id, message] of bad) {
    throws(
      () => sandboxFileName(id),
      (e: unknown) => e instanceof InvalidIdError && message.test(String(e)),
      id,
    );
    assertEquals(sandboxIdOfFileName(`${id}.json`), undefined);
  }
  assertEquals(sandboxFileName("x".repeat(128)).length, 133);
});
