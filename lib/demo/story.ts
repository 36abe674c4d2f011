/**
 * The demo's story, step by step: what happens to the node, the agent's real passes, and what
 * must be true afterwards. Every world change is one the simulated node makes the way a real
 * node would see it (lib/sim/node.ts); every decision and every byte written is the agent's.
 */
import { relative } from "node:path";
import { MANIFEST_MODE } from "../core/checkpoint_layout.ts";
import { copyPodId } from "../core/ids.ts";
import { CHECKPOINT_ANNOTATION, type Pod, podId } from "../core/pod.ts";
import { formatInstant } from "../core/time.ts";
import { defaultConfig } from "../config/load.ts";
import { millisBetween } from "../sim/clock.ts";
import { KUBELET_TIMINGS } from "../sim/kubelet_model.ts";
import { formatMode } from "./disk.ts";
import {
  apiServerPod,
  checkpointFiles,
  containerStatusOf,
  entriesUnder,
  imageOf,
  kubeletDid,
  kubeletEvents,
  lastContainerEvent,
  manifestImage,
  mountedValues,
  parentsOf,
  readFiles,
  sameList,
  setImage,
  storedAccessOf,
  versionsOf,
} from "./facts.ts";
import { DEMO_NODE_NAME, type DemoSession, SYNC_RETRY_MS } from "./session.ts";
import type { PassRecord, Step } from "./step.ts";

/** The modes the checkpoint trees must have, as the disk listing shows them. */
const MANIFEST = formatMode(MANIFEST_MODE);

export interface StoryStep {
  name: string;
  title: string;
  play(step: Step, session: DemoSession): Promise<void>;
}

function ids(pods: Pod[]): string[] {
  return pods.map(podId);
}

function names(list: string[]): string {
  return list.length <= 1 ? list.join("") : `${list.slice(0, -1).join(", ")} and ${list.at(-1)}`;
}

function appOf(pod: Pod): string {
  return pod.metadata.labels?.["k8s-app"] ?? pod.metadata.name;
}

function dirOf(session: DemoSession, path: string): string {
  return relative(session.node.root, path);
}

/** The states the pass left for these ids, e.g. all "inactive". */
function statesAre(
  state: Record<string, { state: string }>,
  wanted: string[],
  name: string,
): boolean {
  return wanted.every((id) => state[id]?.state === name);
}

/** The static-pod dir holds the installer's etcd.yaml, and no copy. */
async function expectStaticPodDirBare(step: Step, what: string): Promise<void> {
  const staticDir = await step.staticPodDir();
  step.expect(what, sameList(staticDir, ["etcd.yaml"]), staticDir);
}

/** Time passes on the node, the kubelet acting along the way, and on the agent's clock alike. */
async function later(session: DemoSession, ms: number): Promise<void> {
  await session.node.advance(ms);
  session.clock.skip(ms);
}

function changesAre(
  changes: { id: string; from: string; to: string; reason: string }[],
  wanted: string[],
  expected: { from: string; to: string; reason: string },
): boolean {
  return sameList(changes.map((c) => c.id), wanted) &&
    changes.every((c) =>
      c.from === expected.from && c.to === expected.to && c.reason === expected.reason
    );
}

const checkpointsTaken: StoryStep = {
  name: "checkpoints-taken",
  title: "Checkpoints are taken",
  async play(step, session) {
    const { cluster, node, config } = session;
    const parents = parentsOf(cluster);
    const others = cluster.pods.filter((p) => !parents.includes(p));
    step.say(
      `Node ${node.nodeName} runs its control plane as DaemonSet pods. ${
        names(parents.map(appOf))
      } carry the annotation ${CHECKPOINT_ANNOTATION}: "true"; ${
        names(others.map(appOf))
      } runs there too, without it.`,
    );
    step.say(
      `The kubelet's static-pod dir ${
        dirOf(session, config.staticPodDir)
      } already holds etcd.yaml, put there by the installer: a static pod, not a checkpoint, which the agent must leave alone.`,
    );
    const pass = await step.pass();
    step.say(
      "Each checkpoint is inactive: stored, ready, not handed to the kubelet. Its action is " +
        '"stop" (keep it out of the static-pod dir), reported because it is new; there was ' +
        "nothing to delete.",
    );
    step.expect("every source answered", pass.complete, pass.sources);
    step.expect(
      `the ${parents.length} annotated pods are tracked as inactive checkpoints, and nothing else`,
      statesAre(pass.plan.state, ids(parents), "inactive") &&
        sameList(Object.keys(pass.plan.state), ids(parents)),
      pass.plan.state,
    );
    const manifests = parents.map((p) => checkpointFiles(session, podId(p)).inactive);
    step.expect(
      `each has a sanitized manifest in the inactive dir, mode ${MANIFEST}`,
      manifests.every((path) => step.disk.get(path)?.mode === MANIFEST),
      manifests.map((path) => `${path} ${step.disk.get(path)?.mode ?? "missing"}`),
    );
    const stored = parents.flatMap((p) => {
      const files = checkpointFiles(session, podId(p));
      return [
        ...entriesUnder(step.disk, files.secrets),
        ...entriesUnder(step.disk, files.configmaps),
      ]
        .map((entry) => ({ entry, want: storedAccessOf(p) }));
    });
    const wrongModes = stored.filter(({ entry, want }) =>
      "error" in want ||
      `${entry.mode} ${entry.owner}` !==
        want[entry.type !== "dir" ? "file" : entry.path.endsWith("/_volumes") ? "above" : "dir"]
    );
    step.expect(
      "their secret and configmap files are readable by the pod's user and no one else, in " +
        "directories only the agent can write",
      stored.length > 0 && wrongModes.length === 0,
      wrongModes.map(({ entry }) => `${entry.path} ${entry.mode} ${entry.owner}`),
    );
    const missing: string[] = [];
    for (const parent of parents) {
      const files = checkpointFiles(session, podId(parent));
      const paths = [
        ...entriesUnder(step.disk, files.secrets),
        ...entriesUnder(step.disk, files.configmaps),
      ].filter((e) => e.type === "file").map((e) => e.path);
      const contents = new Set(await readFiles(node.root, paths));
      for (const { key, value } of mountedValues(parent, cluster)) {
        if (!contents.has(value)) missing.push(`${podId(parent)} ${key}`);
      }
    }
    step.expect(
      "every secret and configmap key the pods mount is stored, byte for byte",
      missing.length === 0,
      missing,
    );
    await expectStaticPodDirBare(step, "nothing was put in the static-pod dir");
  },
};

const controlPlaneLost: StoryStep = {
  name: "control-plane-lost",
  title: "The control plane is lost",
  async play(step, session) {
    const { node, cluster } = session;
    const parents = ids(parentsOf(cluster));
    await node.loseControlPlane();
    step.say(
      "Power cut. When the node is back, the kubelet starts what sits in its static-pod dir " +
        "(etcd) and nothing else: the DaemonSet pods, the API server among them, would need an " +
        "API server to be started again. The kubelet also refuses the agent's requests, " +
        "since it cannot authorize them without the API server. The container runtime still " +
        "lists the parents' old sandboxes, stopped, with their exited containers: they do not " +
        "count as running.",
    );
    step.say(
      "A dry run (what `ckpt-agent --once --dry-run` prints) shows what the agent sees and " +
        "would do. The daemon would not wait: it acts on its next pass, one poll interval " +
        "(5 s by default) later at most.",
    );
    const pass = await step.dryRun();
    step.expect(
      "the API server did not answer",
      pass.sources.apiserver !== "ok",
      pass.sources.apiserver,
    );
    step.expect("the runtime answered", pass.sources.runtime === "ok", pass.sources.runtime);
    const running = await step.running();
    step.expect(
      "none of the parents runs",
      parents.every((id) => !running.includes(id)),
      running,
    );
    step.expect(
      "the agent would activate every checkpoint",
      sameList(pass.plan.starts, parents) && statesAre(pass.plan.state, parents, "active"),
      pass.plan,
    );
  },
};

const checkpointsActivated: StoryStep = {
  name: "checkpoints-activated",
  title: "The checkpoints are activated",
  async play(step, session) {
    const { node, cluster, config, stores } = session;
    const parents = ids(parentsOf(cluster));
    const first = await step.pass();
    step.expect(
      "each checkpoint went from inactive to active because the control plane is unavailable",
      changesAre(first.changes, parents, {
        from: "inactive",
        to: "active",
        reason: "ControlPlaneUnavailable",
      }),
      first.changes,
    );
    step.expect(
      "the agent started every checkpoint",
      sameList(first.plan.starts, parents),
      first.plan.starts,
    );
    const copies = parents.map((id) => checkpointFiles(session, id));
    const copied = await Promise.all(copies.map(async (files) => {
      const [active, inactive] = await readFiles(node.root, [files.active, files.inactive])
        .catch(() => ["", "-"]);
      return active === inactive && step.disk.get(files.active)?.mode === MANIFEST;
    }));
    step.expect(
      `each inactive manifest was linked into the static-pod dir, mode ${MANIFEST}`,
      copied.every(Boolean),
      copies.map((f, i) => `${f.active}: ${copied[i] ? "ok" : "missing or different"}`),
    );
    await node.sync();
    step.say(
      `The kubelet finds the new manifests in ${
        dirOf(session, config.staticPodDir)
      } and runs them as static pods, named after the node (${
        copyPodId(parents[0], node.nodeName)
      }). The checkpointed API server serves again, on this node alone, with the secrets the agent stored.`,
    );
    const running = await step.running();
    const copyIds = parents.map((id) => copyPodId(id, node.nodeName));
    step.expect(
      "the runtime runs every copy",
      copyIds.every((id) => running.includes(id)),
      running,
    );
    step.say(
      "On its next pass the agent sees the copies running. Nothing changes: it records the " +
        "sandboxes they run in (network namespace, ports, addresses) and writes nothing else.",
    );
    const second = await step.pass();
    step.expect(
      "the next pass changes no state and starts nothing again",
      second.changes.length === 0 && second.plan.starts.length === 0,
      second.plan,
    );
    const recorded = stores.sandboxes.list();
    step.expect(
      "the sandbox of each running copy is recorded",
      recorded.length === parents.length,
      recorded,
    );
  },
};

const controlPlaneReturns: StoryStep = {
  name: "control-plane-returns",
  title: "The control plane returns",
  async play(step, session) {
    const { node, cluster } = session;
    const parents = ids(parentsOf(cluster));
    const copies = parents.map((id) => copyPodId(id, node.nodeName));
    const seen = node.events.length;
    await node.restoreControlPlane();
    step.say(
      "With the checkpointed API server up, the cluster comes back: the API server answers and " +
        "the kubelet can authorize the agent again. It admits the DaemonSet pods bound to the " +
        "node beside the copies (the copies declare no host ports, so its NodePorts check has " +
        "nothing to refuse) and gives each a sandbox at once. Their containers must wait: the " +
        "kubelet makes none before it has read the cluster's services " +
        "(CreateContainerConfigError), and tries again 10 s later.",
    );
    const waiting = await step.dryRun();
    step.expect("every source answered", waiting.complete, waiting.sources);
    step.expect(
      "the kubelet admitted every parent beside its copy",
      parents.every((id) => kubeletDid(node, seen, id, "admitted")),
      node.events.slice(seen),
    );
    step.expect(
      "a ready sandbox is not a running parent: the agent would keep every copy",
      waiting.plan.stops.length === 0 && statesAre(waiting.plan.state, parents, "active"),
      waiting.plan,
    );
    await later(session, SYNC_RETRY_MS);
    step.say(
      `${SYNC_RETRY_MS / 1000} s later the kubelet has read the services and makes the ` +
        "containers. The API server's and the controller-manager's find their ports held by " +
        "their copies and exit; the scheduler's runs, on a network of its own. Each parent's " +
        "container exists now: the kubelet has shown it can start it.",
    );
    const pass = await step.dryRun();
    const running = await step.running();
    step.expect(
      "every parent has a container, and every copy still runs",
      [...parents, ...copies].every((id) => running.includes(id)),
      running,
    );
    step.expect(
      "the parents on the host network exited: their copies hold their ports",
      parents.filter((id) => kubeletDid(node, seen, id, "container-exited")).length === 2,
      node.events.slice(seen),
    );
    step.expect(
      "the agent would withdraw every copy",
      sameList(pass.plan.stops, parents) && statesAre(pass.plan.state, parents, "inactive"),
      pass.plan,
    );
  },
};

const copiesWithdrawn: StoryStep = {
  name: "copies-withdrawn",
  title: "The copies are withdrawn",
  async play(step, session) {
    const { node, cluster, stores } = session;
    const parents = ids(parentsOf(cluster));
    const pass = await step.pass();
    step.expect(
      "each checkpoint went from active to inactive because its parent runs",
      changesAre(pass.changes, parents, {
        from: "active",
        to: "inactive",
        reason: "ParentRunning",
      }),
      pass.changes,
    );
    const files = parents.map((id) => checkpointFiles(session, id));
    step.expect(
      "the copies were deleted from the static-pod dir; the inactive manifests stay",
      files.every((f) => !step.disk.has(f.active) && step.disk.has(f.inactive)),
      pass.disk,
    );
    step.expect(
      "the sandbox records of the copies are forgotten",
      stores.sandboxes.list().length === 0,
      stores.sandboxes.list(),
    );
    await node.sync();
    step.say(
      "The kubelet sees the manifests gone and stops the copies. The parents whose containers " +
        "exited are started again at once (a first restart is not delayed), on ports now free; " +
        "a later one would have waited out the kubelet's back-off, 10 s at first. The inactive " +
        "manifests and stored secrets stay on disk, ready for the next outage.",
    );
    const running = await step.running();
    step.expect(
      "only the parents run, not the copies",
      parents.every((id) =>
        running.includes(id) && !running.includes(copyPodId(id, node.nodeName))
      ),
      running,
    );
    step.expect(
      "every parent's container runs",
      parents.every((id) => lastContainerEvent(node, id) === "container-running"),
      node.events.filter((e) => parents.includes(e.pod)).slice(-parents.length),
    );
  },
};

const parentDeleted: StoryStep = {
  name: "parent-deleted",
  title: "A parent is deleted and garbage-collected",
  async play(step, session) {
    const { node, cluster, config, clock, stores } = session;
    const parents = parentsOf(cluster);
    const gone = parents.find((p) => appOf(p) === "kube-scheduler") ?? parents[0];
    const id = podId(gone);
    const kept = ids(parents).filter((other) => other !== id);
    const grace = config.checkpointGracePeriodMs / 1000;
    await node.deleteParent(id);
    step.say(
      `kubectl delete pod -n ${gone.metadata.namespace} ${gone.metadata.name}: the pod is gone ` +
        "from the API server and stops on the node. Its checkpoint is not deleted at once: " +
        `the parent may come back within the grace period (${grace} s).`,
    );
    const first = await step.pass();
    step.expect(
      "the checkpoint entered its grace period because the parent was deleted",
      first.changes.length === 1 && first.changes[0].id === id &&
        first.changes[0].to === "inactive-grace" && first.changes[0].reason === "ParentDeleted",
      first.changes,
    );
    const files = checkpointFiles(session, id);
    step.expect(
      "its files are still there during the grace period",
      step.disk.has(files.inactive) && first.plan.removes.length === 0,
      first.disk,
    );
    clock.skip(config.checkpointGracePeriodMs + 1_000);
    step.say(
      `${grace + 1} s later… (the demo does not wait: it moves the agent's clock past the ` +
        "deadline, and the agent reads no other clock)",
    );
    const second = await step.pass();
    step.expect(
      "the grace period expired and the checkpoint was removed",
      sameList(second.plan.removes, [id]) &&
        second.changes.some((c) => c.id === id && c.reason === "GracePeriodExpired"),
      second.plan,
    );
    const left = [files.inactive, files.secrets, files.configmaps].filter((p) => step.disk.has(p));
    step.expect(
      "its inactive manifest, secrets and configmaps are gone",
      left.length === 0,
      left,
    );
    step.expect(
      "its status record is gone",
      stores.status.get(id) === undefined,
      stores.status.get(id),
    );
    step.expect(
      "the other checkpoints stay inactive, with their files",
      statesAre(second.plan.state, kept, "inactive") && !(id in second.plan.state) &&
        kept.every((other) => step.disk.has(checkpointFiles(session, other).inactive)),
      second.plan.state,
    );
  },
};

/** The daemon's passes are this far apart, by default. */
const POLL_MS = defaultConfig(DEMO_NODE_NAME).pollIntervalMs;

/** The upgrade's image, whose program exits as soon as it starts. */
const BAD_IMAGE = "registry.k8s.io/kube-apiserver:v1.35.0";

/** The copy must serve within this long of the new pod's first crash (as in the e2e drill). */
const TAKEOVER_WITHIN_MS = 90_000;

/** When the demo looks in on the daemon while the copy serves: 1, 3 and 5 minutes after. */
const WHILE_SERVING_MS = [60_000, 120_000, 120_000];

/** `kube-system/kube-apiserver-7x2kq` → `kube-apiserver-7x2kq` */
function nameOf(id: string): string {
  return id.slice(id.indexOf("/") + 1);
}

function seconds(ms: number): string {
  return `${ms / 1000} s`;
}

/** The image the API server's pod ran before any rollout: what its checkpoint keeps. */
function keptImage(session: DemoSession): string | undefined {
  return imageOf(apiServerPod(session.cluster.pods));
}

/**
 * A DaemonSet rollout of the API server to `image`, as `kubectl set image` or `rollout undo`
 * makes one: the pod replaced by one of a new name, of the next template generation.
 */
async function rollOut(session: DemoSession, image: string): Promise<{ old: Pod; pod: Pod }> {
  const old = apiServerPod(session.node.parents);
  const generation = Number(old.metadata.labels?.["pod-template-generation"] ?? "1") + 1;
  const pod = await session.node.replaceParent(podId(old), (pod) => {
    pod.metadata.labels = { ...pod.metadata.labels, "pod-template-generation": `${generation}` };
    setImage(pod, image);
    return pod;
  });
  return { old, pod };
}

/** Every file of the checkpoint is gone from the disk after the step's latest pass. */
function checkpointGone(step: Step, session: DemoSession, id: string): boolean {
  const files = checkpointFiles(session, id);
  return [files.active, files.inactive, files.secrets, files.configmaps]
    .every((path) => !step.disk.has(path));
}

const badRollout: StoryStep = {
  name: "bad-rollout",
  title: "A bad rollout takes the API server away",
  async play(step, session) {
    const { node } = session;
    const good = keptImage(session);
    const old = apiServerPod(node.parents);
    const oldId = podId(old);
    const kept = await versionsOf(session, oldId);
    step.say(
      `Then an upgrade. The API server's checkpoint keeps version 1: the spec its pod ` +
        `${old.metadata.name} runs, Ready, with ${good}. The upgrade rolls out a new image: ` +
        "kubectl -n kube-system set image daemonset/kube-apiserver " +
        `kube-apiserver=${BAD_IMAGE}.`,
    );
    step.expect(
      "the API server's checkpoint keeps version 1, of the spec that runs, and nothing waits",
      kept.kept.join() === "1" && kept.candidate === undefined &&
        await manifestImage(session, checkpointFiles(session, oldId).inactive) === good,
      kept,
    );
    node.breakImage(BAD_IMAGE);
    const { pod: bad } = await rollOut(session, BAD_IMAGE);
    const badId = podId(bad);
    step.say(
      `The DaemonSet deletes ${old.metadata.name} and creates ${bad.metadata.name}. The kubelet ` +
        "kills the old pod and starts the new one, whose program exits as it starts (exit code " +
        "1: say, a flag the new version no longer knows). The kubelet starts it again at once, " +
        "then waits before each restart, 10 s, twice as long each time (CrashLoopBackOff). The " +
        "API server went with the old pod. The kubelet still answers the agent: it authorized " +
        "it moments ago, and keeps such an answer for 5 minutes.",
    );
    const first = await step.pass();
    step.expect(
      "the API server did not answer; the kubelet and the runtime did",
      first.sources.apiserver !== "ok" && first.sources.kubelet === "ok" &&
        first.sources.runtime === "ok",
      first.sources,
    );
    const heir = await versionsOf(session, badId);
    step.expect(
      `the new pod's checkpoint inherited version 1, which runs ${good}; the new spec waits ` +
        "beside it as a candidate",
      heir.kept.join() === "1" && heir.candidate === BAD_IMAGE &&
        await manifestImage(session, checkpointFiles(session, badId).inactive) === good,
      heir,
    );
    step.expect(
      "the new pod counts as running for now; the old pod's checkpoint, its parent gone and " +
        "the API server with it, is activated",
      changesAre(first.changes.filter((c) => c.id === badId), [badId], {
        from: "none",
        to: "inactive",
        reason: "ParentRunning",
      }) &&
        changesAre(first.changes.filter((c) => c.id === oldId), [oldId], {
          from: "inactive",
          to: "active",
          reason: "ControlPlaneUnavailable",
        }),
      first.changes,
    );
    step.say(
      "The agent finds the new pod through the kubelet. Its checkpoint inherits the old pod's " +
        "kept version, made over for the new pod; its own spec waits as a candidate, which " +
        "would replace version 1 only once the pod had run it Ready for a minute " +
        "(promoteAfter). Its container exists in a ready sandbox, exited or not, which counts " +
        "as running: its checkpoint is inactive. The old pod's checkpoint finds its parent gone " +
        "and no API server to vouch for it, and is activated as in any outage.",
    );
    await node.sync();
    const oldCopy = copyPodId(oldId, node.nodeName);
    const copyRuns = await step.running();
    step.expect("the kubelet runs the old pod's copy", copyRuns.includes(oldCopy), copyRuns);
    await later(session, POLL_MS);
    step.say(
      `The old pod's copy serves the API server again. ${seconds(POLL_MS)} later, the ` +
        "daemon's next pass:",
    );
    const second = await step.pass();
    step.expect("the API server answered", second.sources.apiserver === "ok", second.sources);
    step.expect(
      "the old pod's checkpoint was superseded: withdrawn and removed, every file of it",
      changesAre(second.changes, [oldId], { from: "active", to: "remove", reason: "Superseded" }) &&
        sameList(second.plan.removes, [oldId]) && checkpointGone(step, session, oldId),
      second.plan,
    );
    step.say(
      "A new pod of the same DaemonSet took that checkpoint's kept version, and the old pod is " +
        "gone for good: the new pod's checkpoint is the fallback now. The old one's copy must " +
        "not hold the ports the new pod needs (a good rollout would start on them), so it goes " +
        "at once. The kubelet stops the copy, and the API server is gone again.",
    );
    await node.sync();
    const running = await step.running();
    step.expect(
      "no API server runs: the old pod's copy is stopped, the new pod's container exited",
      !running.includes(oldCopy) && lastContainerEvent(node, badId) !== "container-running",
      running,
    );
  },
};

const crashLoopJudged: StoryStep = {
  name: "crash-loop-judged",
  title: "The new pod is judged crash-looping, and the kept version takes over",
  async play(step, session) {
    const { node, config } = session;
    const good = keptImage(session);
    const badId = podId(apiServerPod(node.parents));
    await later(session, config.crashLoopAfterMs);
    const exits = kubeletEvents(node, badId, "container-exited");
    step.say(
      `${seconds(config.crashLoopAfterMs)} later… (the demo moves the node's clock, on which ` +
        "the kubelet restarts the pod, and the agent's alike; the daemon's passes in between " +
        `change nothing). The kubelet has started the new pod's container ${exits.length} ` +
        "times, and it exited each time; the pod was never Ready. A new spec, not Ready, its " +
        `container restarted again and again for ${seconds(config.crashLoopAfterMs)} ` +
        "(crashLoopAfter): the agent judges its pod crash-looping, and a crash-looping pod does " +
        "not count as running.",
    );
    const pass = await step.pass();
    step.expect("the API server did not answer", pass.sources.apiserver !== "ok", pass.sources);
    step.expect(
      "the new pod's checkpoint went from inactive to active because its parent crash-loops " +
        "on an unproven spec, with kept version 1",
      changesAre(pass.changes, [badId], {
        from: "inactive",
        to: "active",
        reason: "ParentCrashLooping",
      }) && pass.changes[0].message.endsWith("kept version 1 active"),
      pass.changes,
    );
    const files = checkpointFiles(session, badId);
    step.expect(
      `the copy in the static-pod dir is version 1, with ${good}`,
      await manifestImage(session, files.active) === good,
      await manifestImage(session, files.active),
    );
    await node.sync();
    const copy = copyPodId(badId, node.nodeName);
    const firstCrash = exits[0]?.at;
    const tookOver = kubeletEvents(node, copy, "container-running")[0]?.at;
    const took = firstCrash !== undefined && tookOver !== undefined
      ? millisBetween(firstCrash, tookOver)
      : undefined;
    step.say(
      `The kubelet runs the copy, ${nameOf(copy)}, with the spec of version 1, and the API ` +
        `server answers again: at ${tookOver === undefined ? "?" : formatInstant(tookOver)} by ` +
        `the node's clock, ${took === undefined ? "?" : seconds(took)} after the new pod's ` +
        "container first exited.",
    );
    const running = await step.running();
    step.expect("the runtime runs the copy", running.includes(copy), running);
    step.expect(
      `the copy took over within ${seconds(TAKEOVER_WITHIN_MS)} of the first crash`,
      took !== undefined && took <= TAKEOVER_WITHIN_MS,
      took,
    );
  },
};

const copyStays: StoryStep = {
  name: "copy-stays",
  title: "The copy stays while the pod crash-loops",
  async play(step, session) {
    const { node } = session;
    const badId = podId(apiServerPod(node.parents));
    const copy = copyPodId(badId, node.nodeName);
    const seen = node.events.length;
    step.say(
      "The API server is back, served by the copy, and the kubelet reports the new pod to it. " +
        "The agent sees the API server up, the pod listed and its container there: that alone " +
        "once made a running parent, and withdrawing the copy would have taken the API server " +
        "with it. A pod crash-looping on an unproven spec counts as running only once it is " +
        "Ready, so the copy stays. The demo looks in on the daemon 1, 3 and 5 minutes later.",
    );
    const passes: PassRecord[] = [];
    for (const ms of WHILE_SERVING_MS) {
      await later(session, ms);
      passes.push(await step.pass());
    }
    step.expect(
      "the API server answered every pass",
      passes.every((p) => p.sources.apiserver === "ok"),
      passes.map((p) => p.sources.apiserver),
    );
    step.expect(
      "no pass changed a state or stopped anything: the copy stays",
      passes.every((p) => p.changes.length === 0 && p.plan.stops.length === 0) &&
        (await step.running()).includes(copy),
      passes.map((p) => p.plan),
    );
    const versions = await versionsOf(session, badId);
    step.expect(
      "the new spec was never promoted: the checkpoint keeps version 1, the candidate waits",
      versions.kept.join() === "1" && versions.candidate === BAD_IMAGE &&
        !passes.some((p) => p.log.some((l) => l.msg === "candidate promoted")),
      versions,
    );
    const status = containerStatusOf(apiServerPod(node.parents));
    const waiting = (status?.state as { waiting?: { reason?: string; message?: string } })
      ?.waiting;
    step.expect(
      "the API server shows the new pod's container not ready, in CrashLoopBackOff",
      waiting?.reason === "CrashLoopBackOff" && status?.ready === false,
      status,
    );
    const exited = kubeletEvents(node, badId, "container-exited")
      .filter((e) => node.events.indexOf(e) >= seen);
    step.expect(
      "the kubelet kept restarting it, and it exited every time",
      exited.length > 0 && !kubeletDid(node, seen, badId, "container-running"),
      node.events.slice(seen).filter((e) => e.pod === badId).map((e) => e.event),
    );
    step.say(
      `In those 5 minutes the kubelet started the new pod's container ${exited.length} more ` +
        `times, and it exited at once every time; the API server counts ` +
        `${status?.restartCount ?? "?"} restarts, and the kubelet says: ` +
        `${waiting?.message ?? "?"}. The copy serves on, and the operator has an API server ` +
        "to undo the rollout with.",
    );
  },
};

const rolledBack: StoryStep = {
  name: "rolled-back",
  title: "The operator rolls back through the API the copy serves",
  async play(step, session) {
    const { node } = session;
    const good = keptImage(session)!;
    const { old: bad, pod: fixed } = await rollOut(session, good);
    const [badId, fixedId] = [podId(bad), podId(fixed)];
    // The kubelet restarts an exited container at once the first time.
    await node.sync();
    step.say(
      "kubectl -n kube-system rollout undo daemonset/kube-apiserver, answered by the copy: the " +
        `DaemonSet deletes ${bad.metadata.name} and creates ${fixed.metadata.name}, with ` +
        `${good} again. The kubelet kills the crash-looping pod and starts the new one, whose ` +
        "container finds its port held by the copy and exits; started again at once, it exits " +
        "again, and waits out a back-off of 10 s.",
    );
    step.expect(
      "the kubelet started the new pod, and its container exited on the port the copy holds",
      kubeletDid(node, 0, fixedId, "container-exited") &&
        kubeletEvents(node, fixedId, "container-exited")
          .every((e) => e.detail?.startsWith("address already in use")),
      node.events.filter((e) => e.pod === fixedId).map((e) => `${e.event} ${e.detail ?? ""}`),
    );
    const pass = await step.pass();
    step.expect(
      "every source answered",
      Object.values(pass.sources).every((s) => s === "ok"),
      pass.sources,
    );
    step.expect(
      "the crash-looping pod's checkpoint entered its grace period, still active: its copy " +
        "serves on",
      changesAre(pass.changes.filter((c) => c.id === badId), [badId], {
        from: "active",
        to: "active-grace",
        reason: "ParentDeleted",
      }) && pass.plan.stops.every((id) => id !== badId),
      pass.changes,
    );
    const versions = await versionsOf(session, fixedId);
    step.expect(
      `the new pod's checkpoint inherited version 1; its spec, ${good} again, waits beside it`,
      versions.kept.join() === "1" && versions.candidate === good &&
        await manifestImage(session, checkpointFiles(session, fixedId).inactive) === good,
      versions,
    );
    step.say(
      "The crash-looping pod is gone from the API server: its checkpoint enters its grace " +
        "period, still active, and its copy serves on; the bad spec's candidate is dropped " +
        "with it. The new pod's checkpoint inherits version 1. Its spec is version 1's but for " +
        "the DaemonSet's generation label, so it too waits as a candidate, promoted once the " +
        "pod has run it Ready for a minute.",
    );
    step.expect(
      "the new pod counts as running: its container exists",
      changesAre(pass.changes.filter((c) => c.id === fixedId), [fixedId], {
        from: "none",
        to: "inactive",
        reason: "ParentRunning",
      }),
      pass.changes,
    );
  },
};

const copyWithdrawn: StoryStep = {
  name: "copy-withdrawn",
  title: "The copy is withdrawn, and the new pod serves",
  async play(step, session) {
    const { node, stores, config } = session;
    const fixedId = podId(apiServerPod(node.parents));
    const badId = stores.status.list().find((record) => record.state === "active-grace")?.id;
    await later(session, POLL_MS);
    step.say(`${seconds(POLL_MS)} later, the daemon's next pass:`);
    const pass = await step.pass();
    step.expect(
      "the crash-looping pod's checkpoint was superseded: withdrawn and removed, every file of " +
        "it",
      badId !== undefined &&
        changesAre(pass.changes, [badId], {
          from: "active-grace",
          to: "remove",
          reason: "Superseded",
        }) &&
        sameList(pass.plan.removes, [badId]) && checkpointGone(step, session, badId),
      pass.plan,
    );
    await node.sync();
    step.say(
      "The crash-looping pod is gone for good, and its checkpoint's kept version lives on in " +
        "the new pod's: like the old pod's checkpoint before it, it is superseded, and its copy " +
        "must free the port for the new pod. The kubelet stops the copy; there is no API " +
        "server until the new pod's container is started again, at the end of its back-off.",
    );
    await later(session, POLL_MS);
    step.say(`${seconds(POLL_MS)} later, the daemon's next pass:`);
    const hole = await step.pass();
    step.expect(
      "with the API server gone, the agent changed nothing and started nothing: the new pod's " +
        `container exists, and has not been failing for ${seconds(config.crashLoopAfterMs)}`,
      hole.sources.apiserver !== "ok" && hole.plan.starts.length === 0 &&
        hole.changes.length === 0,
      hole,
    );
    await later(session, POLL_MS);
    const stopped = badId === undefined
      ? undefined
      : kubeletEvents(node, copyPodId(badId, node.nodeName), "killed")[0];
    const serving = kubeletEvents(node, fixedId, "container-running")[0];
    const gap = stopped && serving ? millisBetween(stopped.at, serving.at) : undefined;
    step.say(
      `${seconds(POLL_MS)} later the kubelet has started the new pod's container, at ` +
        `${serving ? formatInstant(serving.at) : "?"} by the node's clock; it runs and serves ` +
        `the API server, which was gone for ${gap === undefined ? "?" : seconds(gap)}. The ` +
        "agent sees the new pod Ready: a minute of that, and its spec is promoted to the " +
        "checkpoint.",
    );
    const last = await step.pass();
    step.expect(
      "the API server answered, served by the new pod",
      last.sources.apiserver === "ok" && lastContainerEvent(node, fixedId) === "container-running",
      last.sources,
    );
    step.expect(
      `the API server was gone no longer than the kubelet's restart back-off ` +
        `(${seconds(KUBELET_TIMINGS.restartBackoffMs)})`,
      gap !== undefined && gap <= KUBELET_TIMINGS.restartBackoffMs,
      gap,
    );
    const versions = await versionsOf(session, fixedId);
    step.expect(
      "the new pod's checkpoint stays inactive, with version 1, ready for the next bad rollout",
      last.changes.length === 0 && last.plan.state[fixedId]?.state === "inactive" &&
        versions.kept.join() === "1",
      { state: last.plan.state[fixedId], versions },
    );
    step.expect(
      "the agent saw the new pod Ready: its spec's wait to be promoted has begun",
      versions.readySince !== undefined,
      versions,
    );
    await expectStaticPodDirBare(step, "no copy is left in the static-pod dir");
  },
};

export const STORY: readonly StoryStep[] = [
  checkpointsTaken,
  controlPlaneLost,
  checkpointsActivated,
  controlPlaneReturns,
  copiesWithdrawn,
  parentDeleted,
  badRollout,
  crashLoopJudged,
  copyStays,
  rolledBack,
  copyWithdrawn,
];
