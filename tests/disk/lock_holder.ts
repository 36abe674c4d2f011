/**
 * A second process for the lock tests: takes the lock at Deno.args[0] and prints
 * `acquired <pid>` (then holds it until killed or stdin closes), or prints `held <pid>`.
 */
import { acquireLock, isLock } from "../../lib/disk/lock.ts";

const result = await acquireLock(Deno.args[0]);
if (isLock(result)) {
  console.log(`acquired ${Deno.pid}`);
  for await (const _ of Deno.stdin.readable) { /* hold until stdin closes */ }
  await result.release();
} else {
  console.log(`held ${result.heldBy}`);
}
