/**
 * What went wrong with a file or a connection, as the system said it, without the runtime's
 * wrapping, for one-line messages whose caller names the file or the address. Deno says
 * "No such file or directory (os error 2): readfile '/etc/x'"; fetch says "fetch failed" and
 * puts hyper's account in the cause: "error sending request for url (...): client error
 * (Connect): tcp connect error: Connection refused (os error 111)".
 */
export function osErrorText(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const account = error.cause instanceof Error ? error.cause.message : error.message;
  const told = /(?:^|: )([^:]+?) \(os error \d+\)/.exec(account);
  if (told === null) return account;
  return told[1][0].toLowerCase() + told[1].slice(1);
}

/** The errno behind an error, when the system gave one: 2 for a missing file, 111 refused. */
export function osErrorCode(error: unknown): number | undefined {
  if (!(error instanceof Error)) return undefined;
  const account = error.cause instanceof Error ? error.cause.message : error.message;
  const code = /\(os error (\d+)\)/.exec(account);
  return code === null ? undefined : Number(code[1]);
}
