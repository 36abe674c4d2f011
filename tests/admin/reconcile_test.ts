/**
 * POST /v1/reconcile over real HTTP: the token file's rules decide whether it is enabled, and the
 * bearer token whether a request may run a pass.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import type { PassReport } from "../../lib/pass/report.ts";
import { type DaemonFixture, type ServedFixture, withServedDaemon } from "./harness.ts";

const TOKEN = "s3cr3t-admin-token-0123456789abcdef";

function reconcile(f: ServedFixture, authorization?: string) {
  return f.request("/v1/reconcile", {
    method: "POST",
    headers: authorization === undefined ? {} : { authorization },
  });
}

async function expectStatus(f: ServedFixture, authorization: string | undefined, status: number) {
  const response = await reconcile(f, authorization);
  const body = await response.json();
  assertEquals([authorization, response.status], [authorization, status]);
  return { response, body };
}

function startupReason(f: DaemonFixture): string | undefined {
  const line = f.log.find("admin: mutating requests disabled")[0];
  return line?.reason as string | undefined;
}

Deno.test("no token file: mutating requests answer 403 naming the file and the setting, as the start-up log does", async () => {
  await withServedDaemon({}, async (f) => {
    const file = f.config.adminTokenFile;
    for (const auth of [undefined, `Bearer ${TOKEN}`]) {
      const { body } = await expectStatus(f, auth, 403);
      assertEquals(body, {
        error: `mutating requests are disabled on this agent: no token file at ${file}; ` +
          `set adminTokenFile (--admin-token-file) to a token file, or make ${file} a regular ` +
          "file of root's, mode 0600, holding one random word",
      });
    }
    assertEquals(startupReason(f), `no token file at ${file}`);
    const [line] = f.log.find("admin: mutating requests disabled");
    assertEquals([line.level, line.tokenFile], ["warn", file]);
    assert(String(line.fix).includes("adminTokenFile (--admin-token-file)"), String(line.fix));
    assertEquals(f.daemon.lastReport, undefined);
  });
});

Deno.test("a token file with group or other bits keeps mutating requests disabled", async () => {
  for (const mode of [0o644, 0o640, 0o604, 0o660]) {
    await withServedDaemon({ prepare: (f) => f.writeToken(TOKEN, mode) }, async (f) => {
      await expectStatus(f, `Bearer ${TOKEN}`, 403);
      assertEquals(
        startupReason(f),
        `${f.config.adminTokenFile} has mode 0${
          mode.toString(8)
        }; it must be 0600 or stricter (no group or other bits)`,
      );
    });
  }
});

Deno.test("an empty token file keeps mutating requests disabled", async () => {
  await withServedDaemon({ prepare: (f) => f.writeToken("\n") }, async (f) => {
    await expectStatus(f, "Bearer ", 403);
    assertEquals(startupReason(f), `${f.config.adminTokenFile} is empty`);
  });
});

Deno.test("a 0600 token file: 401 without or with a wrong token, 200 and the pass's report with the right one", async () => {
  await withServedDaemon({ prepare: (f) => f.writeToken(`${TOKEN}\n`) }, async (f) => {
    assertEquals(f.log.find("admin: mutating requests enabled").length, 1);
    for (
      const [auth, error] of [
        [undefined, "missing bearer token"],
        ["", "missing bearer token"],
        [TOKEN, "missing bearer token"],
        [`Basic ${btoa(`admin:${TOKEN}`)}`, "missing bearer token"],
        ["Bearer", "missing bearer token"],
        [`Bearer ${TOKEN}x`, "wrong token"],
        [`Bearer ${TOKEN.slice(0, -1)}`, "wrong token"],
        [`Bearer ${TOKEN.toUpperCase()}`, "wrong token"],
      ]
    ) {
      const { response, body } = await expectStatus(f, auth, 401);
      assertEquals(body, { error });
      assertEquals(response.headers.get("www-authenticate"), 'Bearer realm="ckpt-agent"');
    }
    assertEquals(f.daemon.lastReport, undefined);

    const { body } = await expectStatus(f, `Bearer ${TOKEN}`, 200);
    const report = body as PassReport;
    assert(report.complete);
    assertEquals(report.plan.stops.length, 3);
    assertEquals(report, JSON.parse(JSON.stringify(f.daemon.lastReport)));
    // The scheme is case-insensitive, as HTTP says.
    await expectStatus(f, `bearer ${TOKEN}`, 200);
  });
});

Deno.test("a token file changed while the agent runs takes effect on the next request", async () => {
  await withServedDaemon({}, async (f) => {
    await expectStatus(f, `Bearer ${TOKEN}`, 403);
    await f.writeToken(TOKEN);
    await expectStatus(f, `Bearer ${TOKEN}`, 200);
    await Deno.chmod(f.config.adminTokenFile, 0o644);
    await expectStatus(f, `Bearer ${TOKEN}`, 403);
    assertEquals(f.log.find("admin: mutating requests disabled").length, 2);
  });
});
