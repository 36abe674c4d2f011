import { TRUSTED_AGE_MS } from "../../lib/disk/verified_files.ts";
/** Polls until `test` holds, for what happens on its own (a watch's event): 400 × 25 ms at most. */
export async function until(what: string, test: () => boolean): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (test()) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`never: ${what}`);
}

/**
 * Waits until `path` was last changed TRUSTED_AGE_MS ago: the agent may then remember it by its
 * stat, and the next change of it gets another ctime (Deno reports ctime in whole seconds).
 */
export async function untilSettled(path: string): Promise<void> {
  const ctime = Deno.lstatSync(path).ctime!.getTime();
  await until(`${path} settled`, () => Date.now() > ctime + TRUSTED_AGE_MS);
}
