/**
 * `deno task deb [--binary PATH] [--output-dir DIR]`: builds the Debian package
 * DIR/ckpt-agent_<version>_<arch>.deb (default DIR: dist), version from deno.json, architecture
 * from `dpkg --print-architecture`.
 *
 * The package's files are what `install.sh --root --package` stages: the binary, the unit, the
 * configuration, the alert rules, the manual page (compressed here), and the agent's directories.
 * Added here: the README, the copyright file (deb/copyright, then the license of each
 * npm package the lock file pins), the changelog, the lintian overrides, and the control files:
 * the maintainer scripts from deb/ (install.sh goes into postinst, which makes the admin token
 * with it, and into postrm, which runs after dpkg has removed the package's files), every file
 * under /etc as a conffile (the admin token is not one: postinst makes it), md5sums, and the
 * control file, which dpkg-gencontrol writes from deb/control and deb/changelog with the
 * libraries dpkg-shlibdeps finds the binary needs. dpkg-deb builds the package with root as
 * every file's owner.
 *
 * Without --binary, the binary is compiled from this tree first (scripts/compile.ts, which needs
 * denort: see docs/building.md), so that the package's version and its binary agree. The tools
 * come from dpkg-dev; no debhelper, and no root needed.
 */
import { createHash } from "node:crypto";
import { mkdir } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { gzipSync } from "node:zlib";
import { type CachedNpmPackage, lockedNpmPackages } from "./npm_cache.ts";

const REPO = fileURLToPath(new URL("..", import.meta.url)).replace(/\/$/, "");
const PACKAGE = "ckpt-agent";
const MAINTAINER_SCRIPTS = ["postinst", "prerm", "postrm"];
/**
 * The maintainer scripts that run install.sh, and their line that it replaces, inside a
 * here-document ended by INSTALL_SH.
 */
const WITH_INSTALL_SH = ["postinst", "postrm"];
const INSTALL_SH_MARK = "# scripts/deb.ts puts install.sh here.";
const LICENSE_FILE = /^(licen[cs]e|copying)(\.(md|txt))?$/i;
/** A license whose text Debian ships in /usr/share/common-licenses. */
const APACHE = "Apache-2.0";

export function debFileName(version: string, arch: string): string {
  return `${PACKAGE}_${version}_${arch}.deb`;
}

export async function packageVersion(): Promise<string> {
  return JSON.parse(await Deno.readTextFile(join(REPO, "deno.json"))).version;
}

/** Runs a build tool; its output is shown only when it fails. */
async function tool(program: string, args: string[], cwd?: string): Promise<string> {
  const out = await new Deno.Command(program, { args, cwd, stdin: "null" }).output()
    .catch((e) => {
      if (e instanceof Deno.errors.NotFound) {
        throw new Error(`${program} is not installed (Debian package dpkg-dev, or dpkg)`);
      }
      throw e;
    });
  const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  if (!out.success) {
    throw new Error(`${program} ${args.join(" ")} failed:\n${text(out.stdout)}${text(out.stderr)}`);
  }
  return text(out.stdout);
}

async function writeFile(path: string, content: string | Uint8Array, mode: number) {
  await mkdir(dirname(path), { recursive: true, mode: 0o755 });
  await Deno.writeFile(
    path,
    typeof content === "string" ? new TextEncoder().encode(content) : content,
    { mode },
  );
  await Deno.chmod(path, mode);
}

/** gzip at its best compression, with no name and no time in the header (gzip -9n). */
function gzip(text: string): Uint8Array {
  return gzipSync(new TextEncoder().encode(text), { level: 9 });
}

/** The newest version deb/changelog names: it must be the one being built. */
async function changelogVersion(): Promise<string | undefined> {
  const first = (await Deno.readTextFile(join(REPO, "deb/changelog"))).split("\n")[0];
  return /^ckpt-agent \(([^)]+)\)/.exec(first)?.[1];
}

/** An npm package's part of the copyright file: its name, version and license. */
async function npmCopyright(pkg: CachedNpmPackage): Promise<string> {
  const manifest = JSON.parse(await Deno.readTextFile(join(pkg.dir, "package.json")));
  const files = (await Array.fromAsync(Deno.readDir(pkg.dir))).filter((entry) => entry.isFile);
  const read = async (name: string) =>
    (await Deno.readTextFile(join(pkg.dir, name))).replaceAll("\r\n", "\n").trimEnd();
  let text: string;
  if (manifest.license === APACHE) {
    // Debian ships this license's text: the copyright file refers to it, with the package's
    // author and notices.
    const author = typeof manifest.author === "object"
      ? `${manifest.author.name}${manifest.author.email ? ` <${manifest.author.email}>` : ""}`
      : manifest.author;
    const notices = files.filter((entry) => /notice/i.test(entry.name));
    text = [
      `Copyright: ${author ?? "its authors"}.`,
      `License: ${APACHE}. On Debian systems, its full text is in ` +
      `/usr/share/common-licenses/${APACHE}.`,
      ...await Promise.all(notices.map((entry) => read(entry.name))),
    ].join("\n\n");
  } else {
    const file = files.find((entry) => LICENSE_FILE.test(entry.name));
    if (!file) throw new Error(`npm package ${pkg.name} ${pkg.version} ships no license file`);
    text = await read(file.name);
  }
  const title = `${pkg.name} ${pkg.version} (${manifest.license})`;
  return `${title}\n${"-".repeat(title.length)}\n\n${text}\n`;
}

async function copyright(): Promise<string> {
  const parts = [await Deno.readTextFile(join(REPO, "deb/copyright"))];
  const seen = new Set<string>();
  for (const pkg of await lockedNpmPackages(join(REPO, "deno.lock"))) {
    const id = `${pkg.name}@${pkg.version}`;
    if (seen.has(id)) continue;
    seen.add(id);
    parts.push(await npmCopyright(pkg));
  }
  return parts.join("\n");
}

/** The maintainer script from deb/, with install.sh in its here-document if it has one. */
async function maintainerScript(name: string): Promise<string> {
  const script = await Deno.readTextFile(join(REPO, "deb", name));
  if (!WITH_INSTALL_SH.includes(name)) return script;
  const installSh = await Deno.readTextFile(join(REPO, "install.sh"));
  if (script.split("\n").filter((line) => line === INSTALL_SH_MARK).length !== 1) {
    throw new Error(`deb/${name}: no single line "${INSTALL_SH_MARK}"`);
  }
  if (installSh.split("\n").includes("INSTALL_SH")) {
    throw new Error(
      "install.sh has a line INSTALL_SH, which would end a maintainer script's here-document",
    );
  }
  return script.replace(INSTALL_SH_MARK, installSh.trimEnd());
}

/** Every regular file under `dir`, as paths relative to it, sorted. */
async function filesUnder(dir: string): Promise<string[]> {
  const files: string[] = [];
  async function walk(path: string) {
    for await (const entry of Deno.readDir(path)) {
      const child = join(path, entry.name);
      if (entry.isDirectory) await walk(child);
      else if (entry.isFile) files.push(relative(dir, child));
    }
  }
  if ((await Deno.stat(dir).catch(() => undefined))?.isDirectory) await walk(dir);
  return files.sort();
}

/** The control files that list the data: conffiles (everything under /etc) and md5sums. */
async function listControlFiles(root: string) {
  const conffiles = (await filesUnder(join(root, "etc"))).map((path) => `/etc/${path}`);
  const md5sums: string[] = [];
  for (const path of await filesUnder(root)) {
    if (path.startsWith("DEBIAN/") || conffiles.includes(`/${path}`)) continue;
    const md5 = createHash("md5").update(await Deno.readFile(join(root, path))).digest("hex");
    md5sums.push(`${md5}  ${path}\n`);
  }
  await writeFile(join(root, "DEBIAN/conffiles"), conffiles.map((f) => `${f}\n`).join(""), 0o644);
  await writeFile(join(root, "DEBIAN/md5sums"), md5sums.join(""), 0o644);
}

export async function buildDeb(
  options: { binary?: string; outputDir: string },
): Promise<string> {
  const version = await packageVersion();
  const logged = await changelogVersion();
  if (logged !== version) {
    throw new Error(
      `deb/changelog's newest entry is ${logged}, deno.json's version ${version}: ` +
        "add an entry for it at the top of deb/changelog",
    );
  }
  const arch = (await tool("dpkg", ["--print-architecture"])).trim();
  const work = await Deno.makeTempDir({ prefix: "ckpt-agent-deb-" });
  try {
    let binary = options.binary;
    if (binary === undefined) {
      binary = join(work, "ckpt-agent");
      const { code } = await new Deno.Command(Deno.execPath(), {
        args: ["run", "--allow-all", join(REPO, "scripts/compile.ts"), "--output", binary],
        stdin: "null",
      }).spawn().status;
      if (code !== 0) throw new Error("the binary could not be compiled (see above)");
    }
    // dpkg-shlibdeps and dpkg-gencontrol work in a source tree's layout: debian/control, and the
    // package's files in debian/<package>.
    const root = join(work, "debian", PACKAGE);
    await tool(join(REPO, "install.sh"), ["--root", root, "--package", "--binary", binary]);

    const doc = join(root, "usr/share/doc", PACKAGE);
    await writeFile(join(doc, "copyright"), await copyright(), 0o644);
    await writeFile(
      join(doc, "changelog.gz"),
      gzip(await Deno.readTextFile(join(REPO, "deb/changelog"))),
      0o644,
    );
    await writeFile(
      join(doc, "README.md.gz"),
      gzip(await Deno.readTextFile(join(REPO, "README.md"))),
      0o644,
    );
    // Staged by install.sh as it is in the tree; Debian's manual pages are compressed.
    const manPage = join(root, "usr/share/man/man8/ckpt-agent.8");
    await writeFile(`${manPage}.gz`, gzip(await Deno.readTextFile(manPage)), 0o644);
    await Deno.remove(manPage);
    await writeFile(
      join(root, "usr/share/lintian/overrides", PACKAGE),
      await Deno.readTextFile(join(REPO, "deb/lintian-overrides")),
      0o644,
    );

    for (const name of MAINTAINER_SCRIPTS) {
      await writeFile(join(root, "DEBIAN", name), await maintainerScript(name), 0o755);
    }
    await Deno.chmod(join(root, "DEBIAN"), 0o755);
    await listControlFiles(root);

    await Deno.copyFile(join(REPO, "deb/control"), join(work, "debian/control"));
    await Deno.copyFile(join(REPO, "deb/changelog"), join(work, "debian/changelog"));
    const substvars = `debian/${PACKAGE}.substvars`;
    // Warnings 1 and 4 (a symbol not found, a binary outside the package's directory), not 2:
    // the runtime links libraries it uses no symbol of, which is Deno's business.
    await tool(
      "dpkg-shlibdeps",
      ["--warnings=5", `-T${substvars}`, `debian/${PACKAGE}/usr/bin/ckpt-agent`],
      work,
    );
    await tool(
      "dpkg-gencontrol",
      [`-p${PACKAGE}`, `-Pdebian/${PACKAGE}`, `-T${substvars}`, "-fdebian/files"],
      work,
    );

    await mkdir(options.outputDir, { recursive: true });
    const deb = join(options.outputDir, debFileName(version, arch));
    await tool("dpkg-deb", ["--root-owner-group", "--build", root, deb]);
    return deb;
  } finally {
    await Deno.remove(work, { recursive: true });
  }
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      binary: { type: "string" },
      "output-dir": { type: "string", default: "dist" },
    },
  });
  try {
    const deb = await buildDeb({
      binary: values.binary === undefined ? undefined : resolve(values.binary),
      outputDir: resolve(Deno.cwd(), values["output-dir"]!),
    });
    console.log(`deb: built ${deb}`);
  } catch (e) {
    console.error(`deb: ${e instanceof Error ? e.message : e}`);
    Deno.exit(1);
  }
}
