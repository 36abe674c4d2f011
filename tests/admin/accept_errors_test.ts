/**
 * An accept that fails because the process has no descriptor left (EMFILE, for real: a child
 * process that has opened files up to its limit) is said once, tried again, and the connections
 * that waited are served once descriptors are free; never fatal.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { ChildLines } from "../helpers/child_lines.ts";
import { until } from "../helpers/until.ts";
import { readAll, writeAll } from "./harness.ts";

const CHILD = new URL("../helpers/serve_at_descriptor_limit.ts", import.meta.url).pathname;

async function get(port: number): Promise<string> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    await writeAll(conn, new TextEncoder().encode("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    return new TextDecoder().decode(await readAll(conn));
  } finally {
    conn.close();
  }
}

Deno.test("an accept failing with EMFILE is said once, tried again, and the waiting connections are served once descriptors are free", async () => {
  const child = new Deno.Command("prlimit", {
    args: ["--nofile=64", Deno.execPath(), "run", "--allow-all", "--quiet", CHILD],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const out = new ChildLines(child.stdout);
  const log = new ChildLines(child.stderr);
  const stdin = child.stdin.getWriter();
  const tell = (line: string) => stdin.write(new TextEncoder().encode(`${line}\n`));
  try {
    await until("the child serves", () => out.lines.length > 0);
    const port = Number(out.lines[0].split(" ")[1]);
    assertEquals((await get(port)).split("\r\n")[0], "HTTP/1.1 200 OK");

    await tell("fill");
    await until("the child holds every descriptor", () => out.lines.includes("full"));
    // Connected by the kernel, never accepted while the child has no descriptor left.
    const waiting = Array.from({ length: 5 }, () => get(port));
    const failed = "admin: cannot accept connections; trying again";
    await until("the failed accept said", () => log.find(failed).length > 0);
    await tell("free");
    for (const answer of await Promise.all(waiting)) {
      assertEquals([answer.split("\r\n")[0], answer.endsWith("\r\n\r\nok")], [
        "HTTP/1.1 200 OK",
        true,
      ]);
    }
    const [said] = log.find(failed);
    assertEquals(said.level, "error");
    assert(/Too many open files/.test(String(said.error)), String(said.error));
    assertEquals(log.find(failed).length, 1, "said once for the whole episode");
    const [again] = log.find("admin: accepting connections again");
    assert(Number(again.failedAccepts) >= 1, JSON.stringify(again));
  } finally {
    await stdin.close();
    child.kill("SIGTERM");
    await child.status;
    await Promise.all([out.ended, log.ended]);
  }
});
