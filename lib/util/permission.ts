/**
 * Deno's permission errors, told apart from everything else: a permission the agent was not
 * given is a failure of its own configuration (the flags it runs with), never a sign of a peer
 * or a disk (docs/design.md#own-failures).
 */

/** A permission the agent lacks: what Deno asked for, and the flag that grants it. */
export interface MissingPermission {
  /** As Deno says it: `net access to "10.0.0.1:6443"`. */
  permission: string;
  /** `--allow-net`: the run-time flag of that kind of access. */
  flag: string;
}

/**
 * Deno's words for a denied permission, whichever way it is reported: `Requires net access to
 * "host:port", run again with the --allow-net flag` from `deno run`, `…specify the required
 * permissions during compilation using \`deno compile --allow-net\`` from a compiled binary.
 * Errors of node: modules keep the message, so it is read from the text, which survives being
 * quoted into another message.
 */
const REQUIRES = /Requires (\w+) access(?: to ("[^"]*"|[^,\s]+))?/;

/** The permission a message says was denied, if it says one was. */
export function missingPermission(text: string): MissingPermission | undefined {
  const match = REQUIRES.exec(text);
  if (match === null) return undefined;
  const [, kind, what] = match;
  return {
    permission: what === undefined ? `${kind} access` : `${kind} access to ${what}`,
    flag: `--allow-${kind}`,
  };
}

/** The permission an error says was denied (Deno's NotCapable, or its message quoted). */
export function permissionOfError(e: unknown): MissingPermission | undefined {
  return missingPermission(e instanceof Error ? e.message : String(e));
}
