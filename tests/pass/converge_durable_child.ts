/**
 * The durable starts and stops test's child: `count` checkpoints written to the inactive dir
 * under `dir`, then started by converge, then stopped by withdraw, each start and stop told on
 * standard output as it is applied. It writes `converge` just before converge and `withdraw` just
 * before withdraw, so that its trace can be read from there.
 */
import { manifestFileName } from "../../lib/core/checkpoint_layout.ts";
import type { PassResult } from "../../lib/core/pass.ts";
import type { CheckpointState } from "../../lib/core/state.ts";
import { systemClock } from "../../lib/core/time.ts";
import { writeInactiveManifest } from "../../lib/disk/manifests.ts";
import { converge, withdraw } from "../../lib/pass/converge.ts";
import type { Observation } from "../../lib/pass/observe.ts";
import { type PassReport, plannedReport } from "../../lib/pass/report.ts";
import { Writes } from "../../lib/pass/writes.ts";
import { silentLogger } from "../../lib/util/log.ts";
import { checkpoint } from "../helpers/pods.ts";

const [dir, count] = [Deno.args[0], Number(Deno.args[1])];
const paths = {
  staticPodDir: `${dir}/manifests`,
  inactiveDir: `${dir}/inactive`,
  secretsDir: `${dir}/secrets`,
  configmapsDir: `${dir}/configmaps`,
};
const ids = Array.from({ length: count }, (_, i) => `kube-system/component-${i}`);
const names = new Map(ids.map((id) => [id, manifestFileName(id)]));
for (const id of ids) await writeInactiveManifest(paths, checkpoint(id), names.get(id)!);
await Deno.mkdir(paths.staticPodDir);

const say = (line: string) => Deno.stdout.writeSync(new TextEncoder().encode(`${line}\n`));
const active: CheckpointState = { name: "active" };
const result: PassResult = {
  starts: ids,
  stops: [],
  removes: [],
  tracked: new Map(ids.map((id) => [id, active])),
  changes: [],
  parents: new Map(),
  transitioned: true,
};
// What converge reads of an observation: the static-pod dir held none of them.
const obs = { manifestFiles: { active: new Map(), inactive: new Map() } } as unknown as Observation;
const report: PassReport = plannedReport(0n, [], result);
const writes = new Writes(
  silentLogger,
  systemClock,
  (action) => say(`applied ${action.op} ${action.id}`),
);
say("converge");
await converge(paths, writes, result, obs, { names, clashes: [], blocked: [] }, report);
say(`done ${JSON.stringify(report.errors)}`);

const inactive: CheckpointState = { name: "inactive" };
const withdrawal: PassResult = {
  ...result,
  starts: [],
  stops: ids,
  tracked: new Map(ids.map((id) => [id, inactive])),
};
// What withdraw reads of an observation: the static-pod dir held every one of them.
const started = {
  manifestFiles: { active: new Map(ids.map((id) => [names.get(id)!, id])), inactive: new Map() },
} as unknown as Observation;
const stopReport: PassReport = plannedReport(0n, [], withdrawal);
say("withdraw");
await withdraw(paths, writes, withdrawal, started, stopReport);
say(`withdrawn ${JSON.stringify(stopReport.errors)}`);
