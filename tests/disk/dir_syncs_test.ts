/**
 * A checkpoint's writes share their directories' fsyncs, and are durable when told: writeVersion
 * and writeVolumeFiles fsync each directory they changed (a rename into it, a directory made in
 * it) once, after its last change and before they return, whatever the number of files in it;
 * each file is fsynced before its rename. Calls of syncDir made while one runs share the next.
 * Seen in the system calls of a real run (strace), not assumed.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { dirname } from "node:path";
import { TEMP_MARKER } from "../../lib/disk/atomic_write.ts";
import { straceRuns, traceChild } from "../helpers/strace.ts";
import { withTempDir } from "../helpers/temp_dir.ts";

const CHILD = new URL("./dir_syncs_child.ts", import.meta.url).pathname;
const COUNT = 3;
const BURST = 10;

type Event =
  | { kind: "said"; text: string }
  | { kind: "rename" | "mkdir"; path: string }
  | { kind: "fsync"; path: string };

/** The child's events in the order strace saw them start. */
function events(trace: string): Event[] {
  const out: Event[] = [];
  for (const line of trace.split("\n")) {
    const said = /write\(1<[^>]*>, "([^"]*)\\n"/.exec(line);
    const sync = /\b(?:fsync|fdatasync)\(\d+<([^>]*)>/.exec(line);
    const quoted = [...line.matchAll(/"([^"]*)"/g)].map((m) => m[1]);
    if (said) out.push({ kind: "said", text: said[1] });
    else if (sync) out.push({ kind: "fsync", path: sync[1] });
    else if (/\brename(?:at2?)?\(/.test(line)) out.push({ kind: "rename", path: quoted.at(-1)! });
    else if (/\bmkdir(?:at)?\(/.test(line)) out.push({ kind: "mkdir", path: quoted[0] });
  }
  return out;
}

/**
 * Checks one step's events (from one line said to the next): every file fsynced before its
 * rename, every directory changed fsynced exactly once after its last change, and no other
 * directory fsynced. Returns the directories fsynced.
 */
function checkStep(step: Event[], name: string): string[] {
  const fileSyncs = step.filter((e) => e.kind === "fsync" && e.path.includes(TEMP_MARKER));
  const renames = step.filter((e) => e.kind === "rename");
  assertEquals(fileSyncs.length, renames.length, `${name}: one file fsync per rename`);
  const changed = new Map<string, number>();
  step.forEach((e, i) => {
    if (e.kind === "rename" || e.kind === "mkdir") changed.set(dirname(e.path), i);
  });
  const dirSyncs = step.flatMap((e, i) =>
    e.kind === "fsync" && !e.path.includes(TEMP_MARKER) ? [{ dir: e.path, at: i }] : []
  );
  assertEquals(
    dirSyncs.map((s) => s.dir).sort(),
    [...changed.keys()].sort(),
    `${name}: each directory changed fsynced once, and no other`,
  );
  for (const { dir, at } of dirSyncs) {
    assert(at > changed.get(dir)!, `${name}: ${dir} fsynced after its last change`);
  }
  return dirSyncs.map((s) => s.dir);
}

Deno.test({
  name: "a checkpoint's versions and files: each directory fsynced once, before they are told",
  ignore: !straceRuns(),
  fn: async () => {
    await withTempDir(async (dir) => {
      const log = `${dir}/strace.log`;
      await traceChild(
        log,
        "fsync,fdatasync,rename,renameat,renameat2,mkdir,mkdirat,write",
        CHILD,
        [`${dir}/node`, String(COUNT), String(BURST)],
      );
      const all = events(await Deno.readTextFile(log));
      const marks = all.flatMap((e, i) => e.kind === "said" ? [{ text: e.text, at: i }] : []);
      const begins = marks.filter((m) => m.text.startsWith("begin "));
      assertEquals(begins.length, COUNT);

      for (const begin of begins) {
        const i = marks.indexOf(begin);
        const [version, files] = [marks[i + 1], marks[i + 2]];
        assert(version.text.startsWith("version "), version.text);
        assertEquals(files.text, "files 6");
        const versionDir = version.text.slice("version ".length);
        const versionSyncs = checkStep(all.slice(begin.at + 1, version.at), begin.text);
        // Its origin and its manifest: one fsync of the versions dir for both.
        assertEquals(versionSyncs.filter((d) => d === versionDir).length, 1);
        const fileSyncs = checkStep(all.slice(version.at + 1, files.at), `${begin.text} files`);
        // Two files in each volume's directory: one fsync of it.
        for (const volume of ["a", "b", "c"]) {
          assertEquals(fileSyncs.filter((d) => d.endsWith(`/${volume}`)).length, 1);
        }
      }

      const burst = marks.find((m) => m.text === "burst")!;
      const done = marks.find((m) => m.text === "burst done")!;
      const syncs = all.slice(burst.at + 1, done.at).filter((e) => e.kind === "fsync");
      // The first call's fsync, and one more for the calls made while it ran: not one each, and
      // not none for them.
      assertEquals(syncs.length, 2, JSON.stringify(syncs));
    });
  },
});
