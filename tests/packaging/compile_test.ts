/**
 * `deno task compile` (scripts/compile.ts). `deno compile` cannot download its runtime (denort)
 * here, so the deno executable itself stands in through DENORT_BIN: the binary produced is not
 * runnable as the agent, but everything this project controls is checked in it — the permission
 * and V8 flags and the unstable features baked in, the commit stamped into the build info — and
 * the work tree is left as it was.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import denoJson from "../../deno.json" with { type: "json" };
import { gitCommit } from "../../lib/git_commit.ts";
import { AGENT_PERMISSIONS, AGENT_V8_FLAGS } from "../../scripts/permissions.ts";
import { withTempDir } from "../helpers/temp_dir.ts";

const REPO = fileURLToPath(new URL("../../", import.meta.url)).replace(/\/$/, "");
const BUILD_INFO = join(REPO, "lib/build_info.ts");

function compile(output: string, env: Record<string, string>) {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", join(REPO, "scripts/compile.ts"), "--output", output],
    cwd: REPO,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1", ...env },
  }).output();
}

Deno.test("the build bakes in the agent's permissions, V8 flags, unstable features and commit, and leaves the tree as it was", async () => {
  await withTempDir(async (dir) => {
    const tmp = join(dir, "tmp");
    await Deno.mkdir(tmp);
    const output = join(dir, "out/ckpt-agent");
    const buildInfo = await Deno.readTextFile(BUILD_INFO);
    const out = await compile(output, { DENORT_BIN: Deno.execPath(), TMPDIR: tmp });
    const log = new TextDecoder().decode(out.stderr) + new TextDecoder().decode(out.stdout);
    assert(out.success, log);

    assert(((await Deno.stat(output)).mode! & 0o111) !== 0, "executable");
    const binary = new TextDecoder("latin1").decode(await Deno.readFile(output));
    const commit = await gitCommit(REPO);
    assert(commit);
    assert(binary.includes(`export const BUILD_COMMIT: string | undefined = "${commit}";`));
    const metadata = /"permissions":(\{[^{}]*\})/.exec(binary);
    assert(metadata, "permission metadata in the binary");
    const permissions = JSON.parse(metadata[1]);
    assertEquals(
      {
        read: permissions.allow_read,
        write: permissions.allow_write,
        net: permissions.allow_net,
        env: permissions.allow_env,
        sys: permissions.allow_sys,
        run: permissions.allow_run,
        ffi: permissions.allow_ffi,
        prompt: permissions.prompt,
      },
      {
        read: [],
        write: [],
        net: [],
        env: [],
        sys: AGENT_PERMISSIONS.find((p) => p.flag.startsWith("--allow-sys="))!.flag
          .slice("--allow-sys=".length).split(","),
        run: null,
        ffi: null,
        prompt: false,
      },
    );

    const v8Flags = /"v8_flags":(\[[^\]]*\])/.exec(binary);
    assert(v8Flags, "V8 flags in the binary");
    for (const { flag } of AGENT_V8_FLAGS) {
      assert(JSON.parse(v8Flags[1]).includes(flag), `${flag} baked in: ${v8Flags[1]}`);
    }

    // The unstable features deno.json turns on (the net one sends systemd's notifications).
    const unstable = /"unstable_config":\{[^{}]*"features":(\[[^\]]*\])/.exec(binary);
    assert(unstable, "unstable features in the binary");
    assertEquals(JSON.parse(unstable[1]), denoJson.unstable);

    assertEquals(await Deno.readTextFile(BUILD_INFO), buildInfo, "the work tree is not modified");
    assertEquals(await Array.fromAsync(Deno.readDir(tmp)), [], "the build copy is removed");
  });
});

Deno.test("a build without denort says what it needs", async () => {
  await withTempDir(async (dir) => {
    const out = await compile(join(dir, "ckpt-agent"), { DENORT_BIN: join(dir, "no-denort") });
    assert(!out.success);
    const stderr = new TextDecoder().decode(out.stderr);
    assert(stderr.includes("DENORT_BIN") && stderr.includes("docs/building.md"), stderr);
  });
});
