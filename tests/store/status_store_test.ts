/** The status store: copies, transactions, rollback, serialization, deletes, load and quarantine. */
import { deepStrictEqual as assertEquals, ok as assert, rejects, throws } from "node:assert/strict";
import { basename, join } from "node:path";
import { atomicWrite, TEMP_MARKER } from "../../lib/disk/atomic_write.ts";
import { parseInstant } from "../../lib/core/time.ts";
import { encodeRecord, RecordError } from "../../lib/store/envelope.ts";
import { InvalidIdError, statusFileName } from "../../lib/store/layout.ts";
import type { Writer } from "../../lib/store/record_store.ts";
import { phaseOf, type StatusRecord } from "../../lib/store/status_record.ts";
import { StatusStore } from "../../lib/store/status_store.ts";
import { corruptStatusFiles, listDir, plant, statusRecord, withStateDir } from "./records.ts";

const ID = "kube-system/kube-apiserver";
const FILE = "kube-system_kube-apiserver.json";

const put = (record: StatusRecord) => () => record;

async function fileOf(stateDir: string, name = FILE): Promise<unknown> {
  return JSON.parse(await Deno.readTextFile(join(stateDir, "status", name))).data;
}

Deno.test("open creates status/ and quarantine/ with mode 0700", async () => {
  await withStateDir(async (root) => {
    const stateDir = join(root, "state", "nested");
    await StatusStore.open(stateDir);
    assertEquals(await listDir(stateDir), ["quarantine", "status"]);
    for (const sub of ["status", "quarantine"]) {
      assertEquals((await Deno.stat(join(stateDir, sub))).mode! & 0o777, 0o700);
    }
    // A directory someone widened is made private again.
    await Deno.chmod(join(stateDir, "status"), 0o755);
    await StatusStore.open(stateDir);
    assertEquals((await Deno.stat(join(stateDir, "status"))).mode! & 0o777, 0o700);
  });
});

Deno.test("update creates a record: file mode 0600, the id inside, written; same again: unchanged", async () => {
  await withStateDir(async (stateDir) => {
    const store = await StatusStore.open(stateDir);
    const record = statusRecord(ID);
    assertEquals(await store.update(ID, put(record)), "written");
    assertEquals(await fileOf(stateDir), record);
    const info = await Deno.stat(join(stateDir, "status", FILE));
    assertEquals(info.mode! & 0o777, 0o600);
    assertEquals(await store.update(ID, (current) => current!), "unchanged");
    assertEquals(store.get(ID), { ...record, phase: "created" });
  });
});

Deno.test("get and list return copies: changing them changes nothing", async () => {
  await withStateDir(async (stateDir) => {
    const store = await StatusStore.open(stateDir);
    const record = statusRecord(ID);
    await store.update(ID, put(record));
    record.message = "changed by the caller after the update";
    store.get(ID)!.message = "changed through get";
    store.list()[0].message = "changed through list";
    await store.update(ID, (current) => {
      current!.message = "changed inside a throwing fn";
      throw new Error("no");
    }).catch(() => {});
    assertEquals(store.get(ID)!.message, "found on disk");
  });
});

Deno.test("fn sees the current record with its phase, undefined when there is none", async () => {
  await withStateDir(async (stateDir) => {
    const store = await StatusStore.open(stateDir);
    const seen: unknown[] = [];
    await store.update(ID, (current) => {
      seen.push(current);
      return statusRecord(ID);
    });
    await store.update(ID, (current) => {
      seen.push(current);
      return { ...current!, state: "active", lastActivatedAt: "2026-01-01T00:00:10Z" };
    });
    assertEquals(seen, [undefined, { ...statusRecord(ID), phase: "created" }]);
    assertEquals(store.get(ID)!.phase, "activated");
    // The phase handed to fn is not stored.
    assertEquals(Object.keys(await fileOf(stateDir) as object).includes("phase"), false);
  });
});

Deno.test("phase: deactivated only after the last activation, timestamps compared as instants", () => {
  const at = (lastActivatedAt?: string, lastDeactivatedAt?: string) =>
    phaseOf(statusRecord(ID, { lastActivatedAt, lastDeactivatedAt }));
  assertEquals(at(), "created");
  assertEquals(at("2026-01-01T00:00:01Z"), "activated");
  assertEquals(at("2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"), "deactivated");
  assertEquals(at("2026-01-01T00:00:03Z", "2026-01-01T00:00:02Z"), "activated");
  assertEquals(at("2026-01-01T00:00:02Z", "2026-01-01T00:00:02Z"), "activated");
  assertEquals(at(undefined, "2026-01-01T00:00:02Z"), "deactivated");
  // Compared as instants, not as text: 01:00:00+02:00 is before 00:00:00Z.
  assertEquals(at("2026-01-01T00:00:00Z", "2026-01-01T01:00:00+02:00"), "activated");
  assertEquals(at("2026-01-01T00:00:00.1Z", "2026-01-01T00:00:00.10000001Z"), "deactivated");
});

Deno.test("grace states carry their deadline; the record keeps every timestamp", async () => {
  await withStateDir(async (stateDir) => {
    const store = await StatusStore.open(stateDir);
    const record = statusRecord(ID, {
      state: "active-grace",
      graceEnd: "2026-01-01T00:01:00.123456789Z",
      lastActivatedAt: "2026-01-01T00:00:10Z",
      lastDeactivatedAt: "2026-01-01T00:00:05Z",
      reason: "ParentDeleted",
      message: "the API server no longer lists the parent",
    });
    await store.update(ID, put(record));
    const reopened = await StatusStore.open(stateDir);
    assertEquals(reopened.get(ID), { ...record, phase: "activated" });
    assertEquals(parseInstant(reopened.get(ID)!.graceEnd!), 1767225660123456789n);
  });
});

/** A status record file as the agent writes it, byte for byte: the schema records keep. */
const WRITTEN = `{
  "version": "v1",
  "kind": "status",
  "sha256": "9f7d23b589fa43dd23c6735efc70f27ae5c91a698d9282be62fb29b045251bcd",
  "data": {
    "id": "kube-system/kube-apiserver",
    "state": "active-grace",
    "graceEnd": "2026-01-01T00:01:00.123456789Z",
    "createdAt": "2026-01-01T00:00:00Z",
    "lastActivatedAt": "2026-01-01T00:00:10Z",
    "lastDeactivatedAt": "2026-01-01T00:00:05Z",
    "reason": "ParentDeleted",
    "message": "the API server no longer lists the parent"
  }
}
`;

Deno.test("a record file written by an agent loads as written, and is written back the same", async () => {
  await withStateDir(async (stateDir) => {
    await Deno.mkdir(join(stateDir, "status"), { recursive: true });
    await Deno.writeTextFile(join(stateDir, "status", FILE), WRITTEN, { mode: 0o600 });
    const store = await StatusStore.open(stateDir);
    assertEquals(store.problems, []);
    assertEquals(store.get(ID), {
      ...JSON.parse(WRITTEN).data,
      phase: "activated",
    });
    assertEquals(await store.update(ID, (current) => current!), "unchanged");
    await store.update(ID, (current) => ({ ...current!, message: "changed" }));
    await store.update(
      ID,
      (current) => ({ ...current!, message: JSON.parse(WRITTEN).data.message }),
    );
    assertEquals(await Deno.readTextFile(join(stateDir, "status", FILE)), WRITTEN);
  });
});

Deno.test("a throwing fn leaves disk and memory as they were", async () => {
  await withStateDir(async (stateDir) => {
    const store = await StatusStore.open(stateDir);
    await store.update(ID, put(statusRecord(ID)));
    const disk = await fileOf(stateDir);
    await rejects(
      store.update(ID, () => {
        throw new Error("planner failed");
      }),
      /planner failed/,
    );
    await rejects(store.update("ns/new", () => {
      throw new Error("nope");
    }));
    assertEquals(await fileOf(stateDir), disk);
    assertEquals(store.list().map((r) => r.id), [ID]);
    assertEquals(await listDir(join(stateDir, "status")), [FILE]);
  });
});

Deno.test("an invalid result is refused naming the field; nothing changes", async () => {
  await withStateDir(async (stateDir) => {
    const store = await StatusStore.open(stateDir);
    await store.update(ID, put(statusRecord(ID)));
    const cases: [StatusRecord, RegExp][] = [
      [
        statusRecord(ID, { state: "inactive-grace" }),
        /graceEnd: required for state inactive-grace/,
      ],
      [statusRecord(ID, { createdAt: "now" }), /createdAt: not an RFC 3339 timestamp/],
      [statusRecord("ns/other"), /refusing to write the record of "ns\/other"/],
      [{ ...statusRecord(ID), extra: 1 } as StatusRecord, /extra: unknown field/],
    ];
    for (const [result, message] of cases) {
      await rejects(
        store.update(ID, () => result),
        (e: unknown) => e instanceof RecordError && message.test(e.message),
      );
    }
    assertEquals(store.get(ID), { ...statusRecord(ID), phase: "created" });
    assertEquals(await fileOf(stateDir), statusRecord(ID));
  });
});

/** A writer that fails: before touching anything, or after the rename (a failed dir fsync). */
function failingWriter(when: "before" | "after-rename"): { writer: Writer; fail: boolean } {
  const control = {
    fail: false,
    writer: async (path: string, data: string, opts: { mode: number }) => {
      if (!control.fail) return await atomicWrite(path, data, opts);
      control.fail = false; // one failure; the store's own repair write goes through
      if (when === "after-rename") await atomicWrite(path, data, opts);
      throw new Deno.errors.PermissionDenied("injected write failure");
    },
  };
  return control;
}

for (const when of ["before", "after-rename"] as const) {
  Deno.test(`a write failing ${when} leaves disk and memory as they were`, async () => {
    await withStateDir(async (stateDir) => {
      const control = failingWriter(when);
      const store = await StatusStore.open(stateDir, { writer: control.writer });
      await store.update(ID, put(statusRecord(ID)));
      const bytes = await Deno.readFile(join(stateDir, "status", FILE));

      control.fail = true;
      await rejects(
        store.update(ID, (c) => ({ ...c!, state: "active", message: "new" })),
        /injected write failure/,
      );
      assertEquals(store.get(ID)!.state, "inactive");
      assertEquals(await Deno.readFile(join(stateDir, "status", FILE)), bytes);

      control.fail = true;
      await rejects(store.update("ns/fresh", put(statusRecord("ns/fresh"))), /injected/);
      assertEquals(store.get("ns/fresh"), undefined);
      assertEquals(await listDir(join(stateDir, "status")), [FILE]);

      assertEquals((await StatusStore.open(stateDir)).list(), store.list());
    });
  });
}

Deno.test("a directory that cannot be written fails the update and changes nothing", async () => {
  await withStateDir(async (stateDir) => {
    const store = await StatusStore.open(stateDir);
    await store.update(ID, put(statusRecord(ID)));
    // Root ignores permissions, so make the directory unusable instead: swap it for a file.
    const dir = join(stateDir, "status");
    await Deno.rename(dir, `${dir}.moved`);
    await Deno.writeTextFile(dir, "");
    await rejects(store.update(ID, (c) => ({ ...c!, message: "lost" })));
    assertEquals(store.get(ID)!.message, "found on disk");
    await Deno.remove(dir);
    await Deno.rename(`${dir}.moved`, dir);
    assertEquals((await StatusStore.open(stateDir)).get(ID)!.message, "found on disk");
  });
});

Deno.test("concurrent updates of one id run one after the other, none lost", async () => {
  await withStateDir(async (stateDir) => {
    const store = await StatusStore.open(stateDir);
    await store.update(ID, put(statusRecord(ID, { message: "0" })));
    const bump = (c: StatusRecord | undefined) => ({
      ...c!,
      message: String(Number(c!.message) + 1),
    });
    const other = (i: number) => store.update(`ns/p${i}`, put(statusRecord(`ns/p${i}`)));
    await Promise.all([
      ...Array.from({ length: 40 }, () => store.update(ID, bump)),
      ...Array.from({ length: 5 }, (_, i) => other(i)),
      // A failing update in the middle neither blocks nor undoes the others.
      store.update(ID, () => {
        throw new Error("x");
      }).catch(() => {}),
    ]);
    assertEquals(store.get(ID)!.message, "40");
    assertEquals((await fileOf(stateDir) as StatusRecord).message, "40");
    assertEquals(store.list().length, 6);
  });
});

Deno.test("delete is durable and idempotent, and leaves no file behind", async () => {
  await withStateDir(async (stateDir) => {
    const store = await StatusStore.open(stateDir);
    await store.update(ID, put(statusRecord(ID)));
    await store.update("ns/keep", put(statusRecord("ns/keep")));
    await store.delete(ID);
    await store.delete(ID);
    await store.delete("ns/never-existed");
    assertEquals(store.get(ID), undefined);
    assertEquals(await listDir(join(stateDir, "status")), ["ns_keep.json"]);
    assertEquals((await StatusStore.open(stateDir)).list().map((r) => r.id), ["ns/keep"]);
  });
});

Deno.test("a delete waits for the update before it, and an update after it starts afresh", async () => {
  await withStateDir(async (stateDir) => {
    const store = await StatusStore.open(stateDir);
    const seen: unknown[] = [];
    await Promise.all([
      store.update(ID, put(statusRecord(ID))),
      store.delete(ID),
      store.update(ID, (current) => {
        seen.push(current);
        return statusRecord(ID, { message: "again" });
      }),
    ]);
    assertEquals(seen, [undefined]);
    assertEquals(store.get(ID)!.message, "again");
  });
});

Deno.test("a delete left half-way (renamed aside, not removed) is finished by the next open", async () => {
  await withStateDir(async (stateDir) => {
    const store = await StatusStore.open(stateDir);
    await store.update(ID, put(statusRecord(ID)));
    const dir = join(stateDir, "status");
    await Deno.rename(join(dir, FILE), join(dir, `.${FILE}${TEMP_MARKER}deadbeef`));
    const reopened = await StatusStore.open(stateDir);
    assertEquals(reopened.list(), []);
    assertEquals(reopened.swept, [`.${FILE}${TEMP_MARKER}deadbeef`]);
    assertEquals(await listDir(dir), []);
  });
});

Deno.test("open sweeps our temp files only, and load rebuilds memory from disk", async () => {
  await withStateDir(async (stateDir) => {
    const store = await StatusStore.open(stateDir);
    await store.update(ID, put(statusRecord(ID)));
    const dir = join(stateDir, "status");
    await Deno.writeTextFile(join(dir, `.${FILE}${TEMP_MARKER}0001`), '{"torn');
    await Deno.writeTextFile(join(dir, ".operator-notes"), "mine");
    // Another process's view of the disk changes; load brings memory back in line.
    await Deno.writeTextFile(
      join(dir, "ns_added.json"),
      encodeRecord("status", statusRecord("ns/added")),
    );
    await Deno.remove(join(dir, FILE));
    await store.load();
    assertEquals(store.list().map((r) => r.id), ["ns/added"]);
    assertEquals(store.swept, [`.${FILE}${TEMP_MARKER}0001`]);
    assertEquals(await listDir(dir), [".operator-notes", "ns_added.json"]);
  });
});

Deno.test("every kind of bad record is quarantined with its name and a timestamp; the rest served", async () => {
  await withStateDir(async (stateDir) => {
    const good = await StatusStore.open(stateDir);
    for (const id of ["kube-system/etcd", "kube-system/kube-apiserver"]) {
      await good.update(id, put(statusRecord(id)));
    }
    const goodBytes = await Deno.readFile(join(stateDir, "status", FILE));
    const corrupt = corruptStatusFiles();
    await plant(join(stateDir, "status"), corrupt);

    const clock = { now: () => parseInstant("2026-03-04T05:06:07.5Z")! };
    const store = await StatusStore.open(stateDir, { clock });
    assertEquals(store.list().map((r) => r.id), ["kube-system/etcd", ID]);
    const byFile = new Map(store.problems.map((p) => [p.file, p]));
    assertEquals(byFile.size, corrupt.length);
    for (const { name, code } of corrupt) {
      const problem = byFile.get(join(stateDir, "status", name));
      assertEquals(problem?.code, code, name);
      assertEquals(
        problem!.quarantinedTo,
        join(stateDir, "quarantine", "status", `${name}.2026-03-04T05:06:07.5Z`),
      );
    }
    assertEquals(
      await listDir(join(stateDir, "quarantine", "status")),
      corrupt.map((c) => `${c.name}.2026-03-04T05:06:07.5Z`).sort(),
    );
    assertEquals(await listDir(join(stateDir, "status")), ["kube-system_etcd.json", FILE]);
    assertEquals(await Deno.readFile(join(stateDir, "status", FILE)), goodBytes);
    // The moved files are kept byte for byte.
    const torn = corrupt.find((c) => c.name === "ns_torn.json")!;
    assertEquals(
      await Deno.readTextFile(
        join(stateDir, "quarantine", "status", "ns_torn.json.2026-03-04T05:06:07.5Z"),
      ),
      torn.content,
    );
    // The store keeps working, and the next open finds nothing wrong.
    assertEquals(await store.update("ns/torn", put(statusRecord("ns/torn"))), "written");
    assertEquals((await StatusStore.open(stateDir, { clock })).problems, []);
  });
});

Deno.test("a second bad file of the same name and instant does not overwrite the first", async () => {
  await withStateDir(async (stateDir) => {
    const clock = { now: () => parseInstant("2026-03-04T05:06:07Z")! };
    await plant(join(stateDir, "status"), [{ name: "ns_a.json", code: "bad-json", content: "1" }]);
    await StatusStore.open(stateDir, { clock });
    await plant(join(stateDir, "status"), [{ name: "ns_a.json", code: "bad-json", content: "2" }]);
    const store = await StatusStore.open(stateDir, { clock });
    const target = join(stateDir, "quarantine", "status", "ns_a.json.2026-03-04T05:06:07Z");
    assertEquals(store.problems[0].quarantinedTo, `${target}.1`);
    assertEquals(await Deno.readTextFile(target), "1");
    assertEquals(await Deno.readTextFile(`${target}.1`), "2");
  });
});

Deno.test("invalid ids are InvalidIdErrors and create nothing", async () => {
  await withStateDir(async (stateDir) => {
    const store = await StatusStore.open(stateDir);
    for (const id of ["../../etc/passwd", "ns", "ns/a/b", "NS/a", "ns/a_b"]) {
      await rejects(store.update(id, put(statusRecord(id))), InvalidIdError);
      await rejects(store.delete(id), InvalidIdError);
      throws(() => store.get(id), InvalidIdError);
    }
    assertEquals(await listDir(join(stateDir, "status")), []);
    assertEquals(await listDir(stateDir), ["quarantine", "status"]);
  });
});

Deno.test("a long id: its record under a shortened name, loaded back by the id inside", async () => {
  await withStateDir(async (stateDir) => {
    const long = `${"n".repeat(63)}/${"a".repeat(253)}`;
    const store = await StatusStore.open(stateDir);
    assertEquals(await store.update(long, put(statusRecord(long))), "written");
    const [name] = await listDir(join(stateDir, "status"));
    assertEquals([name, new TextEncoder().encode(name).length], [statusFileName(long), 255]);
    const reopened = await StatusStore.open(stateDir);
    assertEquals([reopened.problems, reopened.get(long)?.id], [[], long]);
    // Another long id's record under that name is found out, as any misplaced record is.
    const other = `${"n".repeat(63)}/${"a".repeat(252)}b`;
    await Deno.writeTextFile(
      join(stateDir, "status", name),
      encodeRecord("status", statusRecord(other)),
    );
    const clock = { now: () => parseInstant("2026-03-04T05:06:07.5Z")! };
    const found = await StatusStore.open(stateDir, { clock });
    assertEquals(found.problems.map((p) => p.code), ["misplaced"]);
    // Quarantined under a name the file system takes, the instant kept whole.
    const moved = found.problems[0].quarantinedTo!;
    assert(moved.endsWith(".2026-03-04T05:06:07.5Z"), moved);
    assert(new TextEncoder().encode(basename(moved)).length <= 255, moved);
    assertEquals(await Deno.readTextFile(moved), encodeRecord("status", statusRecord(other)));
  });
});
