/** Reading record files and store directories without a store, as verify does. */
import { deepStrictEqual as assertEquals, rejects } from "node:assert/strict";
import { join } from "node:path";
import { encodeRecord, RecordError, type RecordProblem } from "../../lib/store/envelope.ts";
import { readRecordDir, readRecordFile } from "../../lib/store/record_files.ts";
import { STATUS_RECORDS } from "../../lib/store/status_record.ts";
import { listDir, statusRecord, withStateDir } from "./records.ts";

const rejectsWith = (promise: Promise<unknown>, code: RecordProblem) =>
  rejects(promise, (e: unknown) => e instanceof RecordError && e.code === code);

Deno.test("readRecordFile returns the key and the record of a sound file", async () => {
  await withStateDir(async (dir) => {
    const path = join(dir, "ns_a.json");
    await Deno.writeTextFile(path, encodeRecord("status", statusRecord("ns/a")));
    assertEquals(await readRecordFile(STATUS_RECORDS, path), {
      key: "ns/a",
      record: statusRecord("ns/a"),
    });
  });
});

Deno.test("readRecordFile: a bad name, a missing file, a record under another name", async () => {
  await withStateDir(async (dir) => {
    const valid = encodeRecord("status", statusRecord("ns/a"));
    await Deno.writeTextFile(join(dir, "a.json"), valid);
    await Deno.writeTextFile(join(dir, "ns_b.json"), valid);
    await rejectsWith(readRecordFile(STATUS_RECORDS, join(dir, "a.json")), "bad-name");
    await rejectsWith(readRecordFile(STATUS_RECORDS, join(dir, "ns_gone.json")), "unreadable");
    await rejectsWith(readRecordFile(STATUS_RECORDS, join(dir, "ns_b.json")), "misplaced");
  });
});

Deno.test("readRecordDir: sorted, dot-files skipped, nothing changed; a missing dir is empty", async () => {
  await withStateDir(async (dir) => {
    await Deno.writeTextFile(join(dir, "ns_b.json"), encodeRecord("status", statusRecord("ns/b")));
    await Deno.writeTextFile(join(dir, "ns_a.json"), "torn");
    await Deno.writeTextFile(join(dir, ".ns_c.json.ckpt-tmp-1"), "temp");
    await Deno.symlink(join(dir, "ns_b.json"), join(dir, "ns_link.json"));
    const entries = await readRecordDir(STATUS_RECORDS, dir);
    assertEquals(
      entries.map((e) => [e.name, e.error ? e.error.code : e.key]),
      [["ns_a.json", "bad-json"], ["ns_b.json", "ns/b"], ["ns_link.json", "not-a-file"]],
    );
    assertEquals(await listDir(dir), [
      ".ns_c.json.ckpt-tmp-1",
      "ns_a.json",
      "ns_b.json",
      "ns_link.json",
    ]);
    assertEquals(await readRecordDir(STATUS_RECORDS, join(dir, "missing")), []);
  });
});
