/** Keys → file names: one name per key, and never a path outside the store. */
import { deepStrictEqual as assertEquals, ok as assert, throws } from "node:assert/strict";
import {
  InvalidIdError,
  isSandboxFileName,
  isStatusFileName,
  sandboxFileName,
  statusFileName,
} from "../../lib/store/layout.ts";

Deno.test("status ids map to <namespace>_<name>.json", () => {
  for (const id of ["kube-system/kube-apiserver", "a/b.c-d", "x/y"]) {
    const name = statusFileName(id);
    assertEquals(name, `${id.replace("/", "_")}.json`);
    assert(isStatusFileName(name), name);
  }
  assertEquals(statusFileName("kube-system/etcd.node-1"), "kube-system_etcd.node-1.json");
});

Deno.test("status ids that are not namespace/name with valid names are refused", () => {
  for (const id of ["", "a", "a/b/c", "../b", "a/..", "A/b", "a_b/c", "ns/.hidden", "ns/x y"]) {
    throws(() => statusFileName(id), InvalidIdError, id);
  }
});

Deno.test("a valid id whose file name would exceed 255 bytes gets a shortened one, 255 bytes", () => {
  const name = Array.from({ length: 4 }, () => "n".repeat(62)).join("."); // 251 characters
  const long = statusFileName(`ns/${name}`);
  assertEquals(long.length, 255);
  assert(long.startsWith(`ns_${name.slice(0, 180)}`) && /_[0-9a-f]{32}\.json$/.test(long), long);
  assert(isStatusFileName(long), long);
  assert(statusFileName(`ns/${name.slice(0, -1)}m`) !== long);
  assertEquals(statusFileName(`ns/${name.slice(0, 246)}`), `ns_${name.slice(0, 246)}.json`);
});

Deno.test("file names that are not status records are no status file names", () => {
  for (const name of ["ns_a", "ns_a.txt", "ns.json", "a_b_c.json", "NS_a.json", "_a.json"]) {
    assertEquals(isStatusFileName(name), false, name);
  }
});

Deno.test("sandbox ids: hex digests and the like; never a separator, .. or a leading dot", () => {
  const digest = "0123456789abcdef".repeat(4);
  assertEquals(sandboxFileName(digest), `${digest}.json`);
  assert(isSandboxFileName(`${digest}.json`));
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
    assertEquals(isSandboxFileName(`${id}.json`), false);
  }
  assertEquals(sandboxFileName("x".repeat(128)).length, 133);
});
