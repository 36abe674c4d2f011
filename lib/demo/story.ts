/**
 * The demo's story, step by step: what happens to the node, the agent's real passes, and what
 * must be true afterwards. Every world change is one the simulated node makes the way a real
 * node would see it (lib/sim/node.ts); every decision and every byte written is the agent's.
 */
import { relative } from "node:path";
import { MANIFEST_MODE } from "../core/checkpoint_layout.ts";
import { copyPodId } from "../core/ids.ts";
import { CHECKPOINT_ANNOTATION, type Pod, podId } from "../core/pod.ts";
import { formatMode } from "./disk.ts";
import {
  checkpointFiles,
  entriesUnder,
  kubeletDid,
  lastContainerEvent,
  mountedValues,
  parentsOf,
  readFiles,
  sameList,
  storedAccessOf,
} from "./facts.ts";
import { type DemoSession, SYNC_RETRY_MS } from "./session.ts";
import type { Step } from "./step.ts";

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
    const staticDir = await step.staticPodDir();
    step.expect(
      "nothing was put in the static-pod dir",
      sameList(staticDir, ["etcd.yaml"]),
      staticDir,
    );
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
    const { node, cluster, clock } = session;
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
    await node.advance(SYNC_RETRY_MS);
    clock.skip(SYNC_RETRY_MS);
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

export const STORY: readonly StoryStep[] = [
  checkpointsTaken,
  controlPlaneLost,
  checkpointsActivated,
  controlPlaneReturns,
  copiesWithdrawn,
  parentDeleted,
];
