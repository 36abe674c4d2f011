/**
 * Another user on the node, for tests that race the agent as one: a command run with that user's
 * uid and gid and no groups (setpriv). What it runs must be readable by anyone: the checkout and
 * Deno's cache may be root's alone (a clone in a 0700 directory), so it is Debian's python3.
 */

/** Debian's, which any user can run (a python3 on root's PATH may be root's own). */
export const PYTHON = "/usr/bin/python3";

/** `setpriv` and its arguments, before the command, that run it as `uid`. */
export function asUser(uid: number): string[] {
  return ["setpriv", `--reuid=${uid}`, `--regid=${uid}`, "--clear-groups"];
}
