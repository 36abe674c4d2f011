/**
 * Every reference in the code and the docs points at something a maintainer can open: the design
 * lives in docs/design.md, so a comment names one of its anchors (`docs/design.md#lock`), never a
 * section number of a document outside the tree, a tracker's issue number, or files that are not
 * in the repository. Links to public upstream sources (a Deno issue as `denoland/deno#36788`, a
 * kubelet source path) name something anyone can open and are not matched.
 */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { join, relative } from "node:path";
import { withTempDir } from "./helpers/temp_dir.ts";

const REPO = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const THIS_FILE = relative(REPO, new URL(import.meta.url).pathname);

/** What is scanned, relative to the repository: directories whole, and single files. */
const SCANNED = ["lib", "tests", "bench", "scripts", "docs", "systemd", "main.ts", "README.md"];

const DESIGN_DOC = "docs/design.md";

/** Text that points outside the tree, and why it is refused. */
const OUTSIDE_REFERENCES: readonly { pattern: RegExp; why: string }[] = [
  { pattern: /DESIGN\s*§/g, why: "a section of a design document outside the tree" },
  { pattern: /\bissues?\s+#?\d+\b/gi, why: "an issue number" },
  { pattern: /\bseeds\//g, why: "a file outside the tree" },
];

/** A reference to an anchor of the design, from anywhere (`docs/design.md#x`, `design.md#x`). */
const DESIGN_ANCHOR_REFERENCE = /\bdesign\.md#([A-Za-z0-9_-]*)/g;
/** A link inside the design to one of its own anchors. */
const OWN_ANCHOR_LINK = /\]\(#([A-Za-z0-9_-]*)\)/g;
const ANCHOR = /<a id="([^"]*)"><\/a>/g;

async function filesUnder(root: string, path: string): Promise<string[]> {
  const full = join(root, path);
  let info: Deno.FileInfo;
  try {
    info = await Deno.stat(full);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return [];
    throw error;
  }
  if (info.isFile) return [path];
  const files: string[] = [];
  for await (const entry of Deno.readDir(full)) {
    const child = join(path, entry.name);
    if (entry.isDirectory) files.push(...await filesUnder(root, child));
    else if (entry.isFile) files.push(child);
  }
  return files;
}

function lineOf(text: string, index: number): number {
  return text.slice(0, index).split("\n").length;
}

/** The anchors `<a id>` of the design document, each once; a duplicate is a problem. */
function anchorsOf(design: string, problems: string[]): Set<string> {
  const anchors = new Set<string>();
  for (const match of design.matchAll(ANCHOR)) {
    if (anchors.has(match[1])) {
      problems.push(`${DESIGN_DOC}:${lineOf(design, match.index)}: anchor #${match[1]} twice`);
    }
    anchors.add(match[1]);
  }
  return anchors;
}

/**
 * Every reference under `root` that points outside the tree or at an anchor the design does not
 * have, as `path:line: what`, sorted. `exclude` names files (relative to `root`) not scanned.
 */
async function referenceProblems(
  root: string,
  exclude: readonly string[] = [],
): Promise<string[]> {
  const problems: string[] = [];
  const design = await Deno.readTextFile(join(root, DESIGN_DOC));
  const anchors = anchorsOf(design, problems);
  const files = (await Promise.all(SCANNED.map((path) => filesUnder(root, path)))).flat();
  for (const file of files.filter((file) => !exclude.includes(file))) {
    const text = new TextDecoder().decode(await Deno.readFile(join(root, file)));
    for (const { pattern, why } of OUTSIDE_REFERENCES) {
      for (const match of text.matchAll(pattern)) {
        problems.push(`${file}:${lineOf(text, match.index)}: "${match[0]}" is ${why}`);
      }
    }
    const anchorReferences = [...text.matchAll(DESIGN_ANCHOR_REFERENCE)];
    if (file === DESIGN_DOC) anchorReferences.push(...text.matchAll(OWN_ANCHOR_LINK));
    for (const match of anchorReferences) {
      if (!anchors.has(match[1])) {
        problems.push(
          `${file}:${lineOf(text, match.index)}: no anchor #${match[1]} in ${DESIGN_DOC}`,
        );
      }
    }
  }
  return problems.sort();
}

Deno.test("comments and docs point only inside the tree, at anchors the design has", async () => {
  assertEquals(await referenceProblems(REPO, [THIS_FILE]), []);
});

Deno.test("the check finds each kind of outside reference and every missing anchor", async () => {
  await withTempDir(async (root) => {
    const write = async (path: string, text: string) => {
      await Deno.mkdir(join(root, path, ".."), { recursive: true });
      await Deno.writeTextFile(join(root, path), text);
    };
    await write(
      DESIGN_DOC,
      '<a id="lock"></a>\n\nSee [the lock](#lock) and [gone](#gone).\n<a id="lock"></a>\n',
    );
    await write(
      "lib/disk/lock.ts",
      [
        "/** One agent per node (DESIGN §6). */",
        "/** One agent per node (docs/design.md#lock). */",
        "// As the seed's lock (after seeds/lock.go.txt), see Issue 4, item 9.",
        "// Deno's own bug: denoland/deno#36788; valibot reports issue.path.",
        "// Missing: docs/design.md#locks.",
      ].join("\n"),
    );
    await write("tests/core/state_test.ts", 'Deno.test("follows the issue 12 table", () => {});\n');
    await write("docs/admin.md", "The probes: [health](design.md#health).\n");
    await write("README.md", "[The design](docs/design.md#lock); issues 3 and 4.\n");
    await write("scratch/notes.md", "DESIGN §2 and issue 4, outside what is scanned.\n");
    await write("main.ts", "// DESIGN §1, in a file excluded by name.\n");

    assertEquals(await referenceProblems(root, ["main.ts"]), [
      'README.md:1: "issues 3" is an issue number',
      "docs/admin.md:1: no anchor #health in docs/design.md",
      "docs/design.md:3: no anchor #gone in docs/design.md",
      "docs/design.md:4: anchor #lock twice",
      'lib/disk/lock.ts:1: "DESIGN §" is a section of a design document outside the tree',
      'lib/disk/lock.ts:3: "Issue 4" is an issue number',
      'lib/disk/lock.ts:3: "seeds/" is a file outside the tree',
      "lib/disk/lock.ts:5: no anchor #locks in docs/design.md",
      'tests/core/state_test.ts:1: "issue 12" is an issue number',
    ]);
  });
});
