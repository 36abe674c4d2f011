/**
 * The bearer token that unlocks the admin endpoint's mutating requests (`adminTokenFile`).
 *
 * The file must be a regular file (not a symlink), belong to root or to the agent's user, have no
 * group or other permission bits, and hold one non-empty token; otherwise mutating requests are
 * disabled, and the log (at warn) and each refused request say why, naming the file and the
 * setting. install.sh and the Debian package make the default file on the node. The file is read
 * at start and read again whenever it changes (one lstat per mutating request compares its
 * inode, size, mode, owner and times), so a token can be created, rotated or revoked without
 * restarting the agent — which, during an outage, is the one process that must keep running.
 *
 * Only a SHA-256 digest of the token is kept; a presented token is hashed too and the digests are
 * compared with timingSafeEqual, so neither the token's length nor its content shows in timing.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { type SettingKey, SETTINGS } from "../config/settings.ts";
import type { Logger } from "../util/log.ts";
import { statIdentity } from "../disk/verified_files.ts";

/** The setting that names the token file. */
const SETTING = "adminTokenFile" satisfies SettingKey;

/** Far above any sensible token; a bigger file is not a token file. */
export const MAX_TOKEN_FILE_BYTES = 4096;

export type TokenState =
  | { enabled: true; digest: Uint8Array }
  | { enabled: false; reason: string };

/**
 * What a request's Authorization header earns it; while mutating requests are disabled, the
 * refusal, which says why and what to do.
 */
export type Authorization = "ok" | "missing" | "wrong" | { disabled: string };

function digest(token: string): Uint8Array {
  return createHash("sha256").update(token).digest();
}

function disabled(reason: string): TokenState {
  return { enabled: false, reason };
}

/**
 * What to do about a token file that cannot be used, for the agent's log and refusals and for
 * the command line's: the setting that names the file, and what the file must be.
 */
export function tokenFileFix(path: string): string {
  return `set ${SETTING} (--${SETTINGS[SETTING].flag}) to a token file, or make ${path} ` +
    "a regular file of root's, mode 0600, holding one random word";
}

async function readAtMost(file: Deno.FsFile, limit: number): Promise<Uint8Array> {
  const buffer = new Uint8Array(limit + 1);
  let size = 0;
  while (size < buffer.length) {
    const n = await file.read(buffer.subarray(size));
    if (n === null) break;
    size += n;
  }
  return buffer.subarray(0, size);
}

/** The token file's verdict, given its lstat. */
async function readTokenFile(path: string, info: Deno.FileInfo): Promise<TokenState> {
  if (info.isSymlink) return disabled(`${path} is a symbolic link, not a regular file`);
  if (!info.isFile) return disabled(`${path} is not a regular file`);
  const mode = (info.mode ?? 0) & 0o7777;
  if ((mode & 0o077) !== 0) {
    return disabled(
      `${path} has mode 0${mode.toString(8)}; it must be 0600 or stricter (no group or other bits)`,
    );
  }
  if (info.uid !== 0 && info.uid !== Deno.uid()) {
    return disabled(`${path} belongs to uid ${info.uid}, not to root or to this process's user`);
  }
  let bytes: Uint8Array;
  const file = await Deno.open(path, { read: true });
  try {
    const opened = await file.stat();
    // Replaced between the lstat and the open: the next request sees a new identity and retries.
    if (opened.ino !== info.ino || opened.dev !== info.dev) {
      return disabled(`${path} changed while it was read`);
    }
    bytes = await readAtMost(file, MAX_TOKEN_FILE_BYTES);
  } finally {
    file.close();
  }
  if (bytes.length > MAX_TOKEN_FILE_BYTES) {
    return disabled(`${path} is larger than ${MAX_TOKEN_FILE_BYTES} bytes`);
  }
  let token: string;
  try {
    token = new TextDecoder("utf-8", { fatal: true }).decode(bytes).trim();
  } catch {
    return disabled(`${path} is not UTF-8 text`);
  }
  if (token === "") return disabled(`${path} is empty`);
  if (/\s/.test(token)) {
    return disabled(`${path} holds more than one word; a bearer token has no whitespace`);
  }
  return { enabled: true, digest: digest(token) };
}

const BEARER = /^Bearer +(\S+) *$/i;

export class AdminToken {
  readonly path: string;
  readonly #log: Logger;
  #identity?: string;
  #state: TokenState = disabled("not read yet");

  private constructor(path: string, log: Logger) {
    this.path = path;
    this.#log = log;
  }

  /** Reads the token file once, logging whether mutating requests are enabled and why not. */
  static async load(path: string, log: Logger): Promise<AdminToken> {
    const token = new AdminToken(path, log);
    await token.current();
    return token;
  }

  /** The token file's state now; read again only when the file changed. */
  async current(): Promise<TokenState> {
    let info: Deno.FileInfo | undefined;
    let key: string;
    try {
      info = await Deno.lstat(this.path);
      key = statIdentity(info);
    } catch (e) {
      key = e instanceof Deno.errors.NotFound ? "absent" : `error: ${(e as Error).message}`;
    }
    if (key === this.#identity) return this.#state;
    this.#identity = key;
    try {
      this.#state = info
        ? await readTokenFile(this.path, info)
        : key === "absent"
        ? disabled(`no token file at ${this.path}`)
        : disabled(`cannot read ${this.path}: ${key.slice("error: ".length)}`);
    } catch (e) {
      this.#state = disabled(`cannot read ${this.path}: ${(e as Error).message}`);
    }
    this.#report();
    return this.#state;
  }

  #report() {
    const state = this.#state;
    if (state.enabled) {
      this.#log.info("admin: mutating requests enabled", { tokenFile: this.path });
    } else {
      this.#log.warn("admin: mutating requests disabled", {
        tokenFile: this.path,
        reason: state.reason,
        fix: tokenFileFix(this.path),
      });
    }
  }

  /** Checks an `Authorization: Bearer <token>` header against the token file. */
  async authorize(header: string | undefined): Promise<Authorization> {
    const state = await this.current();
    if (!state.enabled) {
      return {
        disabled: `mutating requests are disabled on this agent: ${state.reason}; ` +
          tokenFileFix(this.path),
      };
    }
    const presented = header === undefined ? null : BEARER.exec(header);
    if (!presented) return "missing";
    return timingSafeEqual(digest(presented[1]), state.digest) ? "ok" : "wrong";
  }
}
