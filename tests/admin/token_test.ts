/** The token file's rules, on real files: what enables mutating requests, and what does not. */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { join } from "node:path";
import { AdminToken, MAX_TOKEN_FILE_BYTES, tokenFileFix } from "../../lib/admin/token.ts";
import { withTempDir } from "../helpers/temp_dir.ts";
import { LogCapture } from "./harness.ts";

async function writeFile(path: string, content: string | Uint8Array, mode = 0o600) {
  if (typeof content === "string") await Deno.writeTextFile(path, content, { mode });
  else await Deno.writeFile(path, content, { mode });
  await Deno.chmod(path, mode);
}

async function reasonFor(path: string): Promise<string | undefined> {
  const state = await (await AdminToken.load(path, new LogCapture().logger)).current();
  return state.enabled ? undefined : state.reason;
}

Deno.test("a regular 0600 or 0400 file owned by this user with one token enables it", async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, "token");
    for (const mode of [0o600, 0o400]) {
      await writeFile(path, "  tok-en_1.2~3+/=  \n", mode);
      const token = await AdminToken.load(path, new LogCapture().logger);
      assertEquals(await token.authorize("Bearer tok-en_1.2~3+/="), "ok");
      assertEquals(await token.authorize("Bearer tok-en_1.2~3+/"), "wrong");
      assertEquals(await token.authorize(undefined), "missing");
      await Deno.remove(path);
    }
  });
});

Deno.test("every unsafe or unusable token file disables mutating requests, with the reason", async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, "token");
    assertEquals(await reasonFor(path), `no token file at ${path}`);

    await writeFile(path, "token", 0o640);
    assertEquals(
      await reasonFor(path),
      `${path} has mode 0640; it must be 0600 or stricter (no group or other bits)`,
    );
    await Deno.chmod(path, 0o601);
    assertEquals(
      await reasonFor(path),
      `${path} has mode 0601; it must be 0600 or stricter (no group or other bits)`,
    );
    await Deno.remove(path);

    for (
      const [content, reason] of [
        ["", `${path} is empty`],
        [" \n\t\n", `${path} is empty`],
        ["two words", `${path} holds more than one word; a bearer token has no whitespace`],
        ["x".repeat(MAX_TOKEN_FILE_BYTES + 1), `${path} is larger than 4096 bytes`],
        [new Uint8Array([0xff, 0xfe, 0x41]), `${path} is not UTF-8 text`],
      ] as const
    ) {
      await writeFile(path, content);
      assertEquals(await reasonFor(path), reason);
      await Deno.remove(path);
    }

    const real = join(dir, "real-token");
    await writeFile(real, "token");
    await Deno.symlink(real, path);
    assertEquals(await reasonFor(path), `${path} is a symbolic link, not a regular file`);
    await Deno.remove(path);

    await Deno.mkdir(path, { mode: 0o700 });
    assertEquals(await reasonFor(path), `${path} is not a regular file`);
    await Deno.remove(path);
  });
});

Deno.test({
  name: "a token file owned by another user disables mutating requests",
  ignore: Deno.uid() !== 0,
  fn: async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, "token");
      await writeFile(path, "token");
      await Deno.chown(path, 4242, 4242);
      assertEquals(
        await reasonFor(path),
        `${path} belongs to uid 4242, not to root or to this process's user`,
      );
    });
  },
});

Deno.test("the file is read again when it changes: rotated, revoked, restored", async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, "token");
    const log = new LogCapture();
    const token = await AdminToken.load(path, log.logger);
    const refused = (reason: string) => ({
      disabled: `mutating requests are disabled on this agent: ${reason}; ${tokenFileFix(path)}`,
    });
    assertEquals(await token.authorize("Bearer one"), refused(`no token file at ${path}`));

    await writeFile(path, "one");
    assertEquals(await token.authorize("Bearer one"), "ok");
    // Rotated the usual way: a new file renamed over the old one.
    await writeFile(`${path}.new`, "two");
    await Deno.rename(`${path}.new`, path);
    assertEquals(await token.authorize("Bearer one"), "wrong");
    assertEquals(await token.authorize("Bearer two"), "ok");
    await Deno.chmod(path, 0o644);
    assertEquals(
      await token.authorize("Bearer two"),
      refused(`${path} has mode 0644; it must be 0600 or stricter (no group or other bits)`),
    );
    await Deno.chmod(path, 0o600);
    assertEquals(await token.authorize("Bearer two"), "ok");
    await Deno.remove(path);
    assertEquals(await token.authorize("Bearer two"), refused(`no token file at ${path}`));

    // Each change is logged once; disabled at warn, with the setting to set.
    assertEquals(
      log.lines.map((l) => [l.level, l.msg, l.fix]),
      [
        ["warn", "admin: mutating requests disabled", tokenFileFix(path)],
        ["info", "admin: mutating requests enabled", undefined],
        ["info", "admin: mutating requests enabled", undefined],
        ["warn", "admin: mutating requests disabled", tokenFileFix(path)],
        ["info", "admin: mutating requests enabled", undefined],
        ["warn", "admin: mutating requests disabled", tokenFileFix(path)],
      ],
    );
    assert(tokenFileFix(path).startsWith("set adminTokenFile (--admin-token-file) to "));
  });
});
