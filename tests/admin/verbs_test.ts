/**
 * The verbs over real HTTP against a daemon on a simulated node: POST
 * /v1/checkpoints/{ns}/{name}/{pin,unpin,rollback,purge} with the token, each idempotent,
 * shown in /v1/checkpoints; bad ids, unknown ids and verbs, a missing token, and a second
 * verb while one is under way.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { hostPathsOf, manifestFileName, versionsDir } from "../../lib/core/checkpoint_layout.ts";
import { podId } from "../../lib/core/pod.ts";
import { asArray, type Json } from "../../lib/core/json.ts";
import { pathExists } from "../../lib/disk/dirs.ts";
import type { VerbResult } from "../../lib/pass/verbs.ts";
import { type ServedFixture, withServedDaemon } from "./harness.ts";

const TOKEN = "s3cr3t-admin-token-0123456789abcdef";
const ID = "kube-system/kube-controller-manager-m4t9z";
const FILE = "kube-system-kube-controller-manager-m4t9z.json";

/** `token` null: no Authorization header at all. */
function verb(f: ServedFixture, path: string, token: string | null = TOKEN) {
  return f.request(`/v1/checkpoints/${path}`, {
    method: "POST",
    headers: token === null ? {} : { authorization: `Bearer ${token}` },
  });
}

async function ok(f: ServedFixture, path: string): Promise<VerbResult> {
  const response = await verb(f, path);
  const body = await response.json();
  assertEquals(response.status, 200, JSON.stringify(body));
  return body;
}

async function view(f: ServedFixture) {
  const response = await f.request(`/v1/checkpoints/${ID}`);
  return [response.status, (await response.json()).versions];
}

/** Three versions of the controller manager: promoteAfter 0 promotes each new spec at once. */
async function threeVersions(f: ServedFixture) {
  assertEquals((await f.pass()).errors, []);
  for (const flag of ["--v=2", "--v=3"]) {
    await f.node.updateParent(ID, (pod) => {
      (asArray((pod.spec as Json).containers)[0].command as string[]).push(flag);
      return pod;
    });
    assertEquals((await f.pass()).errors, []);
  }
}

function served(fn: (f: ServedFixture) => Promise<void>) {
  return withServedDaemon({
    config: { promoteAfterMs: 0 },
    prepare: (f) => f.writeToken(TOKEN),
  }, async (f) => {
    await threeVersions(f);
    await fn(f);
  });
}

Deno.test("verbs: a missing or wrong token, a bad id, an unknown id, verb or version", async () => {
  await served(async (f) => {
    const cases: [string, string | null, number, string][] = [
      [`${ID}/pin`, null, 401, "missing bearer token"],
      [`${ID}/pin`, "wrong", 401, "wrong token"],
      ["kube_system/x/pin", TOKEN, 400, "bad checkpoint id"],
      ["kube-system/Upper/pin", TOKEN, 400, "bad checkpoint id"],
      ["kube-system/nobody/pin", TOKEN, 404, "no checkpoint kube-system/nobody"],
      [`${ID}/freeze`, TOKEN, 404, "no verb freeze"],
      [`${ID}/rollback?to=0`, TOKEN, 400, "to: must be a version number"],
      [`${ID}/rollback?to=9`, TOKEN, 404, "has no version 9"],
      [`${ID}/pin?force=true`, TOKEN, 400, "pin takes no force"],
    ];
    const bodies: [string, string, string][] = [
      [`${ID}/rollback`, "[1]", "body: document: expected object"],
      [`${ID}/rollback`, "{", "body: not JSON"],
      [`${ID}/rollback`, '{"to": "2"}', "body: to: expected number"],
      [`${ID}/rollback`, '{"version": 2}', "body: version: unknown field"],
      [`${ID}/rollback?to=2`, '{"to": 2}', "an option given both"],
      [`${ID}/pin`, '{"force": true}', "pin takes no force"],
    ];
    for (const [path, body, error] of bodies) {
      const response = await f.request(`/v1/checkpoints/${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
        body,
      });
      assertEquals([body, response.status], [body, 400]);
      assert((await response.json()).error.startsWith(error), body);
    }
    for (const [path, token, status, error] of cases) {
      const response = await verb(f, path, token);
      const body = await response.json();
      assertEquals(response.status, status, path);
      assert(body.error.startsWith(error) || body.error.includes(error), body.error);
    }
    // Nothing was changed by any of them.
    assertEquals(await view(f), [200, { kept: 3, versions: [1, 2, 3] }]);
    assertEquals(f.log.find("checkpoint pin"), []);
  });
});

Deno.test("verbs: pin and unpin are idempotent, logged and shown; a pinned candidate waits", async () => {
  await served(async (f) => {
    assertEquals((await ok(f, `${ID}/pin`)).changed, true);
    const again = await ok(f, `${ID}/pin`);
    assertEquals(again.changed, false);
    assert(again.versions?.pinned?.pinnedAt);
    assertEquals(f.log.find("checkpoint pin").map((l) => l.changed), [true, false]);

    await f.node.updateParent(ID, (pod) => {
      (asArray((pod.spec as Json).containers)[0].command as string[]).push("--v=4");
      return pod;
    });
    assertEquals((await f.pass()).errors, []);
    const [, pinned] = await view(f);
    assertEquals(pinned.kept, 3);
    assertEquals(pinned.candidate.version, 4);
    assertEquals(pinned.candidate.waiting, "pinned");

    assertEquals((await ok(f, `${ID}/unpin`)).changed, true);
    assertEquals((await ok(f, `${ID}/unpin`)).changed, false);
    assertEquals((await f.pass()).errors, []);
    assertEquals(await view(f), [200, { kept: 4, versions: [2, 3, 4] }]);
  });
});

Deno.test("verbs: rollback makes the version before the newest the checkpoint, pinned; again changes nothing", async () => {
  await served(async (f) => {
    const inactive = join(f.config.inactiveDir, FILE);
    const v2 = await Deno.readTextFile(join(versionsDir(f.config, ID), "2.json"));
    const first = await ok(f, `${ID}/rollback`);
    assertEquals([first.changed, first.rolledBack], [true, true]);
    assertEquals(await Deno.readTextFile(inactive), v2);
    assertEquals((await ok(f, `${ID}/rollback`)).changed, false);
    const [, versions] = await view(f);
    assertEquals([versions.kept, versions.versions], [2, [1, 2, 3]]);
    assert(versions.pinned);
    // The parent still runs version 3's spec: a candidate, held by the pin.
    assertEquals((await f.pass()).errors, []);
    assertEquals(await Deno.readTextFile(inactive), v2);
    assertEquals((await view(f))[1].candidate.waiting, "pinned");
    const metrics = await (await f.request("/metrics")).text();
    assert(metrics.includes("ckpt_agent_rollbacks_total 1"), metrics);
    assert(metrics.includes("ckpt_agent_promotions_total 2"), metrics);
    assert(metrics.includes("ckpt_agent_candidates_waiting 1"), metrics);
  });
});

Deno.test("verbs: while active, rollback replaces the running copy; purge is refused unless forced", async () => {
  await served(async (f) => {
    await f.node.loseControlPlane();
    assertEquals((await f.pass()).errors, []);
    const active = join(f.config.staticPodDir, FILE);
    assert(await pathExists(active));

    const copy = `${ID}-${f.node.nodeName}`;
    const events = (event: string) =>
      f.node.events.filter((e) => e.pod === copy && e.event === event).length;
    const [killed, started] = [events("killed"), events("container-running")];
    await ok(f, `${ID}/rollback?to=1`);
    const v1 = await Deno.readTextFile(join(versionsDir(f.config, ID), "1.json"));
    assertEquals(await Deno.readTextFile(active), v1, "the kubelet's file is version 1's");
    // The kubelet sees a changed static pod: the copy of version 3 goes, version 1's starts.
    await f.node.sync();
    assertEquals([events("killed"), events("container-running")], [killed + 1, started + 1]);

    const refused = await verb(f, `${ID}/purge`);
    assertEquals(refused.status, 409);
    assert((await refused.json()).error.includes("purge --force"));
    assertEquals((await verb(f, `${ID}/purge?force=false`)).status, 409);
    const purged: VerbResult = await (await f.request(`/v1/checkpoints/${ID}/purge`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ force: true }),
    })).json();
    assertEquals(purged.changed, true);
    for (const path of [active, join(f.config.inactiveDir, FILE), versionsDir(f.config, ID)]) {
      assertEquals(await pathExists(path), false, path);
    }
    assertEquals((await f.request(`/v1/checkpoints/${ID}`)).status, 404);
    assertEquals((await verb(f, `${ID}/purge`)).status, 404, "purged: nothing left to purge");
  });
});

Deno.test("verbs: a second verb while one is under way is refused with 409", async () => {
  await served(async (f) => {
    // A pass under way holds the first verb; the test sees it queue behind that pass.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => release = resolve);
    const held = f.daemon.between(() => gate);
    const queued = Promise.withResolvers<void>();
    const between = f.daemon.between.bind(f.daemon);
    f.daemon.between = (work) => {
      queued.resolve();
      return between(work);
    };
    const first = verb(f, `${ID}/pin`);
    await queued.promise;
    const second = await verb(f, `${ID}/unpin`);
    assertEquals(second.status, 409);
    assert((await second.json()).error.startsWith("another verb is under way"));
    release();
    await held;
    assertEquals((await first).status, 200);
    assertEquals((await ok(f, `${ID}/unpin`)).changed, true, "the refused unpin changed nothing");
  });
});

Deno.test("a pod its DaemonSet recreated under a new name inherits, shown in /v1/checkpoints and the metrics; purging its predecessor leaves it whole", async () => {
  await served(async (f) => {
    const heir = podId(await f.node.replaceParent(ID, (pod) => pod));
    assertEquals((await f.pass()).errors, []);
    const response = await f.request(`/v1/checkpoints/${heir}`);
    const { versions } = await response.json();
    assertEquals(versions, { kept: 1, versions: [1], inheritedFrom: { id: ID, version: 3 } });
    const metrics = await (await f.request("/metrics")).text();
    assert(metrics.includes("ckpt_agent_inheritances_total 1"), metrics);

    assertEquals((await ok(f, `${ID}/purge`)).changed, true);
    const manifest = JSON.parse(
      await Deno.readTextFile(join(f.config.inactiveDir, manifestFileName(heir))),
    );
    const dirs = hostPathsOf(manifest).filter((d) => d.startsWith(f.config.secretsDir));
    assert(dirs.length > 0);
    for (const dir of dirs) assert([...Deno.readDirSync(dir)].length > 0, dir);
  });
});
