/**
 * Starts and stops are durable when they are told: converge links every started checkpoint into
 * the static-pod dir (straight to its name, none being there), withdraw unlinks every stopped
 * one; each fsyncs that directory once for all of them, and only then applies each start or
 * stop. Seen in the system calls of a real run (strace), not assumed.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { straceRuns, traceChild } from "../helpers/strace.ts";
import { withTempDir } from "../helpers/temp_dir.ts";

const CHILD = new URL("./converge_durable_child.ts", import.meta.url).pathname;
const COUNT = 20;

/**
 * The child's calls on the static-pod dir from the line it writes as `mark` until `until`, in
 * order: `link` (straight to a name), `temp link`, `rename`, `unlink`, `fsync` of the dir, and
 * `applied start` or `applied stop` as the child tells them.
 */
async function traced(fn: (events: (mark: string, until?: string) => string[]) => void) {
  await withTempDir(async (dir) => {
    const log = `${dir}/strace.log`;
    const out = await traceChild(
      log,
      "fsync,fdatasync,link,linkat,unlink,unlinkat,rename,renameat,renameat2,write",
      CHILD,
      [`${dir}/node`, String(COUNT)],
    );
    assert(out.includes("done []") && out.includes("withdrawn []"), out);

    const manifests = `${dir}/node/manifests`;
    const lines = (await Deno.readTextFile(log)).split("\n");
    const said = (line: string, text: string) =>
      new RegExp(`write\\(1<[^>]*>, "${text}`).test(line);
    fn((mark, until) => {
      const from = lines.findIndex((l) => said(l, `${mark}\\\\n"`));
      assert(from >= 0, `the ${mark} mark is in the trace`);
      const events: string[] = [];
      for (const line of lines.slice(from + 1)) {
        if (until !== undefined && said(line, `${until}\\\\n"`)) break;
        const inDir = line.includes(`"${manifests}/`);
        if (/\b(fsync|fdatasync)\(\d+<([^>]*)>/.exec(line)?.[2] === manifests) {
          events.push("fsync");
        } else if (/\brename(at2?)?\(/.test(line) && inDir) {
          events.push("rename");
        } else if (/\blink(at)?\(/.test(line) && inDir) {
          events.push(line.includes(`"${manifests}/.`) ? "temp link" : "link");
        } else if (/\bunlink(at)?\(/.test(line) && inDir) {
          events.push("unlink");
        } else {
          const applied = /write\(1<[^>]*>, "applied (start|stop) /.exec(line);
          if (applied) events.push(`applied ${applied[1]}`);
        }
      }
      return events;
    });
  });
}

// Where ptrace is not permitted (some containers), the order cannot be seen: said, not passed.
Deno.test({
  name: "started and stopped checkpoints: the static-pod dir fsynced once for each, then applied",
  ignore: !straceRuns(),
  fn: async () => {
    await traced((events) => {
      const starts = events("converge", "withdraw");
      assertEquals(starts.filter((e) => e === "fsync").length, 1, starts.join(" "));
      assertEquals(starts.filter((e) => e === "link").length, COUNT, starts.join(" "));
      assertEquals(starts.filter((e) => e === "applied start").length, COUNT);
      assertEquals(
        starts.filter((e) => !["link", "fsync", "applied start"].includes(e)),
        [],
        "each start is one link straight to its name",
      );
      const fsync = starts.indexOf("fsync");
      assert(starts.lastIndexOf("link") < fsync, "every link is in place before the fsync");
      assert(starts.indexOf("applied start") > fsync, "no start is told before the fsync");

      const stops = events("withdraw");
      assertEquals(stops.filter((e) => e === "fsync").length, 1, stops.join(" "));
      assertEquals(stops.filter((e) => e === "unlink").length, COUNT, stops.join(" "));
      assertEquals(stops.filter((e) => e === "applied stop").length, COUNT);
      const synced = stops.indexOf("fsync");
      assert(stops.lastIndexOf("unlink") < synced, "every unlink is made before the fsync");
      assert(stops.indexOf("applied stop") > synced, "no stop is told before the fsync");
    });
  },
});
