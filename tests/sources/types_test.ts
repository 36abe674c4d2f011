/**
 * Every source failure is made by failed(): a permission the agent runs without is told apart
 * there, in Deno's words from `deno run` and from a compiled binary, and never from a peer's
 * answer.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { failed, isConfigurationFailure, type SourceFailure } from "../../lib/sources/types.ts";

function failure(message: string, status?: number): SourceFailure {
  const result = failed("apiserver", "unreachable", message, status);
  if (result.ok) throw new Error("a failure");
  return result.failure;
}

Deno.test("a NotCapable message makes the failure not-permitted, with the permission and its flag", () => {
  const run = failure(
    'GET https://10.0.0.1:6443/api: Requires net access to "10.0.0.1:6443", run again with the ' +
      "--allow-net flag",
  );
  assertEquals([run.kind, run.problem], [
    "not-permitted",
    'net access to "10.0.0.1:6443": run with --allow-net',
  ]);
  assertEquals(isConfigurationFailure(run), true);
  const compiled = failure(
    'Requires sys access to "ca", specify the required permissions during compilation using ' +
      "`deno compile --allow-sys`",
  );
  assertEquals([compiled.kind, compiled.problem], [
    "not-permitted",
    'sys access to "ca": run with --allow-sys',
  ]);
});

Deno.test("anything else keeps its kind: other errors, and a peer's answer quoting the words", () => {
  assertEquals(failure("connect ECONNREFUSED 10.0.0.1:6443").kind, "unreachable");
  const quoted = failed(
    "apiserver",
    "server-error",
    'GET /api: 500: Requires net access to "etcd:2379", run again with the --allow-net flag',
    500,
  );
  assertEquals(quoted.ok ? undefined : quoted.failure.kind, "server-error");
});
