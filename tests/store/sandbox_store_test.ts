/** The sandbox checkpoint store: create, get, remove, list; ids and checkpoints validated. */
import { deepStrictEqual as assertEquals, rejects, throws } from "node:assert/strict";
import { join } from "node:path";
import { RecordError } from "../../lib/store/envelope.ts";
import { InvalidIdError } from "../../lib/store/layout.ts";
import type { SandboxCheckpoint } from "../../lib/store/sandbox_checkpoint.ts";
import { SandboxStore } from "../../lib/store/sandbox_store.ts";
import { StatusStore } from "../../lib/store/status_store.ts";
import {
  corruptSandboxFiles,
  listDir,
  plant,
  sandboxCheckpoint,
  statusRecord,
  withStateDir,
} from "./records.ts";

const SANDBOX = "4f1b9c0e7a2d".repeat(5) + "abcd";

Deno.test("create, get, list and remove a sandbox checkpoint", async () => {
  await withStateDir(async (stateDir) => {
    const store = await SandboxStore.open(stateDir);
    const checkpoint = sandboxCheckpoint();
    assertEquals(await store.create(SANDBOX, checkpoint), "written");
    assertEquals(await store.create(SANDBOX, sandboxCheckpoint()), "unchanged");
    await store.create("b-sandbox", sandboxCheckpoint("etcd"));
    assertEquals(store.get(SANDBOX), checkpoint);
    assertEquals(store.list(), [SANDBOX, "b-sandbox"]);
    const file = join(stateDir, "sandboxes", `${SANDBOX}.json`);
    assertEquals((await Deno.stat(file)).mode! & 0o777, 0o600);
    assertEquals(JSON.parse(await Deno.readTextFile(file)).data, {
      sandboxId: SANDBOX,
      checkpoint,
    });

    const reopened = await SandboxStore.open(stateDir);
    assertEquals(reopened.list(), [SANDBOX, "b-sandbox"]);
    assertEquals(reopened.get("b-sandbox"), sandboxCheckpoint("etcd"));

    await store.remove(SANDBOX);
    await store.remove(SANDBOX);
    await store.remove("never-there");
    assertEquals(store.get(SANDBOX), undefined);
    assertEquals(await listDir(join(stateDir, "sandboxes")), ["b-sandbox.json"]);
  });
});

Deno.test("create replaces an earlier checkpoint; get returns a copy", async () => {
  await withStateDir(async (stateDir) => {
    const store = await SandboxStore.open(stateDir);
    const checkpoint = sandboxCheckpoint();
    await store.create(SANDBOX, checkpoint);
    checkpoint.portMappings.push({ protocol: "udp", containerPort: 53, hostPort: 53 });
    store.get(SANDBOX)!.interfaces.length = 0;
    assertEquals(store.get(SANDBOX), sandboxCheckpoint());
    assertEquals(await store.create(SANDBOX, checkpoint), "written");
    assertEquals(store.get(SANDBOX)!.portMappings.length, 3);
  });
});

Deno.test("invalid sandbox ids are refused and never name a path outside the store", async () => {
  await withStateDir(async (stateDir) => {
    const store = await SandboxStore.open(stateDir);
    const bad = ["../escape", "..", "a/b", "/etc/passwd", ".hidden", "", "x".repeat(129), "a..b"];
    for (const id of bad) {
      await rejects(store.create(id, sandboxCheckpoint()), InvalidIdError, id);
      await rejects(store.remove(id), InvalidIdError, id);
      throws(() => store.get(id), InvalidIdError, id);
    }
    assertEquals(await listDir(stateDir), ["quarantine", "sandboxes"]);
    assertEquals(await listDir(join(stateDir, "sandboxes")), []);
  });
});

Deno.test("a checkpoint is validated before it is written: ports, protocols, CIDR addresses", async () => {
  await withStateDir(async (stateDir) => {
    const store = await SandboxStore.open(stateDir);
    const base = sandboxCheckpoint();
    const cases: [SandboxCheckpoint, RegExp][] = [
      [
        { ...base, interfaces: [{ name: "eth0", address: "10.0.0.5" }] },
        /interfaces\[0\]\.address/,
      ],
      [{ ...base, interfaces: [{ name: "eth0", address: "10.0.0.5/33" }] }, /address/],
      [{ ...base, interfaces: [{ name: "eth0", address: "fd00::1/129" }] }, /address/],
      [{ ...base, interfaces: [{ name: "", address: "10.0.0.5/8" }] }, /interfaces\[0\]\.name/],
      [
        { ...base, portMappings: [{ protocol: "icmp" as "tcp", containerPort: 1, hostPort: 0 }] },
        /portMappings\[0\]\.protocol/,
      ],
      [
        { ...base, portMappings: [{ protocol: "tcp", containerPort: 0, hostPort: 0 }] },
        /portMappings\[0\]\.containerPort/,
      ],
      [
        { ...base, portMappings: [{ protocol: "tcp", containerPort: 80, hostPort: 65536 }] },
        /portMappings\[0\]\.hostPort/,
      ],
      [{ ...base, version: "v2" as "v1" }, /checkpoint\.version/],
      [{ ...base, namespace: "Kube_System" }, /checkpoint\.namespace/],
    ];
    for (const [checkpoint, field] of cases) {
      await rejects(
        store.create(SANDBOX, checkpoint),
        (e: unknown) => e instanceof RecordError && field.test(e.message),
        field.source,
      );
    }
    assertEquals(store.list(), []);
    assertEquals(await listDir(join(stateDir, "sandboxes")), []);
  });
});

Deno.test("bad sandbox records are quarantined and the rest served", async () => {
  await withStateDir(async (stateDir) => {
    const good = await SandboxStore.open(stateDir);
    await good.create(SANDBOX, sandboxCheckpoint());
    const corrupt = corruptSandboxFiles();
    await plant(join(stateDir, "sandboxes"), corrupt);
    const store = await SandboxStore.open(stateDir);
    assertEquals(store.list(), [SANDBOX]);
    assertEquals(
      store.problems.map((p) => [p.file, p.code]).sort(),
      corrupt.map((c) => [join(stateDir, "sandboxes", c.name), c.code]).sort(),
    );
    assertEquals((await listDir(join(stateDir, "quarantine", "sandboxes"))).length, corrupt.length);
    assertEquals(await listDir(join(stateDir, "sandboxes")), [`${SANDBOX}.json`]);
  });
});

Deno.test("the two stores share a state directory without seeing each other's records", async () => {
  await withStateDir(async (stateDir) => {
    const sandboxes = await SandboxStore.open(stateDir);
    const statuses = await StatusStore.open(stateDir);
    await sandboxes.create(SANDBOX, sandboxCheckpoint());
    await statuses.update("ns/a", () => statusRecord("ns/a"));
    assertEquals(await listDir(stateDir), ["quarantine", "sandboxes", "status"]);
    assertEquals((await SandboxStore.open(stateDir)).problems, []);
    assertEquals((await StatusStore.open(stateDir)).problems, []);
  });
});
