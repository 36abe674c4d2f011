/**
 * `ckpt-agent status` as a subprocess: from a running agent's admin endpoint (TCP and unix
 * socket), or from the state directory, read-only, when no agent answers.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { formatInstant } from "../../lib/core/time.ts";
import { DaemonFixture, type ServedFixture, START, withServedDaemon } from "../admin/harness.ts";
import { runCli } from "../helpers/cli.ts";

const APISERVER = "kube-system/kube-apiserver-7x2kq";
const created = formatInstant(START);
const deadline = formatInstant(START + 65_000_000_000n);

/** Three checkpoints, the apiserver's in its grace period (its parent deleted). */
async function knownState(f: DaemonFixture) {
  await f.pass();
  f.clock.advance(5_000);
  await f.node.deleteParent(APISERVER);
  await f.pass();
}

/** Each checkpoint at its first version, with no candidate. */
const ROWS = [
  ["ID", "STATE", "SINCE", "DEADLINE", "VERSION", "KEPT", "CANDIDATE"],
  [APISERVER, "inactive-grace", created, deadline, "1", "1", "-"],
  ["kube-system/kube-controller-manager-m4t9z", "inactive", created, "-", "1", "1", "-"],
  ["kube-system/kube-scheduler-q8w2c", "inactive", created, "-", "1", "1", "-"],
];

async function status(f: DaemonFixture, adminListen: string, ...extra: string[]) {
  const config = await f.node.writeConfigFile({ adminListen });
  return await runCli(["status", "--config", config, ...extra]);
}

function tableOf(stdout: string): { source: string; rows: string[][] } {
  const [source, ...lines] = stdout.trimEnd().split("\n");
  return { source, rows: lines.map((line) => line.split(/ {2,}/)) };
}

async function agentView(f: ServedFixture) {
  return (await (await f.request("/v1/checkpoints")).json()).checkpoints;
}

Deno.test("status asks the running agent over TCP: a table, and JSON with the full views", async () => {
  await withServedDaemon({ prepare: knownState }, async (f) => {
    const text = await status(f, f.server.address);
    assertEquals([text.code, text.stderr], [0, ""]);
    assertEquals(tableOf(text.stdout), {
      source: `source: the running agent at ${f.server.address}`,
      rows: ROWS,
    });

    const json = await status(f, f.server.address, "--output", "json");
    assertEquals(json.code, 0);
    assertEquals(JSON.parse(json.stdout), {
      source: "agent",
      address: f.server.address,
      checkpoints: await agentView(f),
    });
  });
});

Deno.test("status asks the running agent over its unix socket", async () => {
  await withServedDaemon({ via: "unix", prepare: knownState }, async (f) => {
    const r = await status(f, f.server.address);
    assertEquals(r.code, 0);
    assertEquals(tableOf(r.stdout), {
      source: `source: the running agent at ${f.server.address}`,
      rows: ROWS,
    });
  });
});

Deno.test("with no agent answering, status reads the state directory read-only, and says so", async () => {
  const f = await DaemonFixture.start();
  try {
    await knownState(f);
    // A record no store would load: a reader that opened the store would move it to quarantine.
    const bad = join(f.config.stateDir, "status", "kube-system_broken.json");
    await Deno.writeTextFile(bad, "{ not a record", { mode: 0o600 });
    const before = [...Deno.readDirSync(f.config.stateDir)].map((e) => e.name).sort();

    const socket = join(f.node.root, "run/nobody.sock");
    const r = await status(f, `unix:${socket}`);
    assertEquals([r.code, r.stderr], [0, ""]);
    const { source, rows } = tableOf(r.stdout);
    assert(
      source.startsWith(
        `source: the state directory ${f.config.stateDir}, read-only (no agent answered at unix:${socket}: `,
      ),
      source,
    );
    assertEquals(rows, ROWS);

    const off = await status(f, "off", "--output", "json");
    const listing = JSON.parse(off.stdout);
    assertEquals([listing.source, listing.stateDir, listing.why], [
      "state-dir",
      f.config.stateDir,
      "the admin endpoint is off",
    ]);
    // The same views the agent would have served.
    assertEquals(
      listing.checkpoints.map((c: { id: string }) => c.id),
      ROWS.slice(1).map((r) => r[0]),
    );
    assertEquals(
      listing.checkpoints[0].paths.activeManifest,
      join(f.config.staticPodDir, "kube-system-kube-apiserver-7x2kq.json"),
    );
    assertEquals(listing.checkpoints[0].status.phase, "created");

    // Nothing moved, nothing made.
    assertEquals([...Deno.readDirSync(f.config.stateDir)].map((e) => e.name).sort(), before);
    assertEquals(await Deno.readTextFile(bad), "{ not a record");
  } finally {
    await f.close();
  }
});

Deno.test("something else answering is not the agent: status falls back; an unreadable state dir exits 1", async () => {
  const f = await DaemonFixture.start();
  const other = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () => Response.json({ hello: "world" }),
  );
  try {
    const address = `127.0.0.1:${other.addr.port}`;
    const r1 = await status(f, address);
    assertEquals(r1.code, 0);
    assertEquals(
      r1.stdout,
      `source: the state directory ${f.config.stateDir}, read-only (the agent at ${address} sent an answer of another shape)\nno checkpoints\n`,
    );

    const file = join(f.node.root, "not-a-dir");
    await Deno.writeTextFile(file, "");
    const config = await f.node.writeConfigFile({ adminListen: "off", stateDir: file });
    const r = await runCli(["status", "--config", config]);
    assertEquals(r.code, 1);
    assert(
      r.stderr.startsWith(
        `ckpt-agent status: the admin endpoint is off, and the state directory ${file} cannot be read: `,
      ),
      r.stderr,
    );
    assertEquals(r.stderr.trimEnd().split("\n").length, 1);
  } finally {
    await other.shutdown();
    await f.close();
  }
});
