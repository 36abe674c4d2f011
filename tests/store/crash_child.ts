/**
 * The crash test's child: opens both stores in `stateDir`, prints `ready`, then performs write
 * after write of the crash sequence from `startSeq` on, printing `ack <seq>` after each durable
 * update, until it is killed.
 */
import { SandboxStore } from "../../lib/store/sandbox_store.ts";
import { StatusStore } from "../../lib/store/status_store.ts";
import { write } from "./crash_ops.ts";

const [stateDir, start] = Deno.args;
const encoder = new TextEncoder();
const say = (line: string) => Deno.stdout.writeSync(encoder.encode(`${line}\n`));

const stores = {
  statuses: await StatusStore.open(stateDir),
  sandboxes: await SandboxStore.open(stateDir),
};
say("ready");
for (let seq = Number(start);; seq++) {
  await write(stores, seq);
  say(`ack ${seq}`);
}
