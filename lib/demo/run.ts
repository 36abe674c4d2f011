/**
 * Plays the story against a fresh session and always ends the session: whether the story ran
 * to its end, failed, or was interrupted, the servers are closed and the node's directory is
 * removed before the result is returned.
 */
import { join, relative } from "node:path";
import { ownerOf, parentsOf } from "./facts.ts";
import { closeSession, type DemoSession, openSession } from "./session.ts";
import { Step, type StepRecord } from "./step.ts";
import { STORY } from "./story.ts";

export interface DemoNodeInfo {
  name: string;
  /** The node's temp directory; every path in the steps is relative to it. */
  root: string;
  apiServer: string;
  kubelet: string;
  runtime: string;
  staticPodDir: string;
  inactiveDir: string;
  secretsDir: string;
  configmapsDir: string;
  stateDir: string;
  /** `uid:gid` the demo's pods run as, and so the owner of their stored secrets. */
  podUser: string;
  /** Not run by root, the demo's pods run as the user who runs it: only root can give files away. */
  podsRunAsYou: boolean;
  gracePeriodSeconds: number;
}

export interface DemoResult {
  /** Every step ran and met its expectations, and nothing was left behind. */
  ok: boolean;
  node: DemoNodeInfo;
  steps: StepRecord[];
  /** Why the story ended before its last step, if it did. */
  stopped?: string;
  /** What could not be removed at the end (nothing, normally). */
  leftBehind: string[];
}

export interface DemoHooks {
  /** Aborting ends the story before its next pass or world change. */
  signal: AbortSignal;
  onStart?(node: DemoNodeInfo): void;
  /** Called after each step; the story goes on when it resolves. */
  onStep?(step: StepRecord, index: number, total: number): Promise<void> | void;
}

/** The installer's static pod: the agent must never touch it. */
const FOREIGN_MANIFEST = "etcd.yaml";

function nodeInfo(session: DemoSession): DemoNodeInfo {
  const { node, config, cluster, user } = session;
  const rel = (path: string) => relative(node.root, path);
  return {
    name: node.nodeName,
    root: node.root,
    apiServer: node.apiServer.url,
    kubelet: node.kubelet.url,
    runtime: config.containerRuntimeEndpoint,
    staticPodDir: rel(config.staticPodDir),
    inactiveDir: rel(config.inactiveDir),
    secretsDir: rel(config.secretsDir),
    configmapsDir: rel(config.configmapsDir),
    stateDir: rel(config.stateDir),
    podUser: ownerOf(parentsOf(cluster)[0]),
    podsRunAsYou: user.uid !== 0,
    gracePeriodSeconds: config.checkpointGracePeriodMs / 1000,
  };
}

/** Content, inode and modification time: any write, even of the same bytes, changes one. */
async function fingerprint(path: string): Promise<string> {
  const [info, bytes] = await Promise.all([Deno.stat(path), Deno.readFile(path)]);
  return JSON.stringify([info.ino, info.mtime?.getTime(), info.mode, [...bytes]]);
}

export async function runDemo(hooks: DemoHooks): Promise<DemoResult> {
  const session = await openSession();
  const node = nodeInfo(session);
  const steps: StepRecord[] = [];
  let stopped: string | undefined;
  let leftBehind: string[] = [];
  try {
    hooks.onStart?.(node);
    const foreign = join(session.config.staticPodDir, FOREIGN_MANIFEST);
    const original = await fingerprint(foreign);
    for (const [index, script] of STORY.entries()) {
      const step = new Step(script.name, script.title, session, hooks.signal);
      await script.play(step, session);
      step.expect(
        `${FOREIGN_MANIFEST}, which is not a checkpoint, is untouched`,
        await fingerprint(foreign) === original,
      );
      const record = await step.finish();
      steps.push(record);
      await hooks.onStep?.(record, index, STORY.length);
      hooks.signal.throwIfAborted();
    }
  } catch (e) {
    stopped = hooks.signal.aborted
      ? String((hooks.signal.reason as Error)?.message ?? hooks.signal.reason)
      : `error: ${(e as Error).message}`;
  } finally {
    leftBehind = await closeSession(session);
  }
  return {
    ok: stopped === undefined && steps.every((s) => s.ok) && leftBehind.length === 0,
    node,
    steps,
    ...(stopped === undefined ? {} : { stopped }),
    leftBehind,
  };
}
