/**
 * `ckpt-agent pin|unpin|rollback|purge NAMESPACE/NAME`: an operator's verb on one checkpoint
 * (lib/pass/verbs.ts). Where it runs is found as `status` finds its source: the running agent's
 * admin endpoint when one answers there (with the token), else the disk under the agent's lock,
 * which a running agent always holds: a lock held by someone else means an agent runs whose
 * endpoint is off or does not answer, and the verb is refused rather than race it.
 */
import { adminPostJson, noAnswer } from "../admin/client.ts";
import { formatListenAddress, parseListenAddress } from "../admin/listen.ts";
import { tokenFileFix } from "../admin/token.ts";
import { commandOptions, commandOutput } from "../cli/commands.ts";
import { CommandError, EXIT_FAILURE, EXIT_LOCKED, EXIT_OK, UsageError } from "../cli/errors.ts";
import { loadConfig } from "../config/load.ts";
import type { Config } from "../config/types.ts";
import { parseValidId } from "../core/ids.ts";
import { systemClock } from "../core/time.ts";
import { acquireLock, isLock } from "../disk/lock.ts";
import {
  BAD_ID,
  runVerb,
  VerbError,
  type VerbName,
  type VerbRequest,
  type VerbResult,
} from "../pass/verbs.ts";
import { AgentStores } from "../store/agent_stores.ts";
import { stderrLogger } from "../util/log.ts";

/**
 * How long the agent may take to answer: a verb waits for the pass under way, which waits on
 * its peers' deadlines at worst.
 */
const VERB_TIMEOUT_MS = 10 * 60_000;

type Done = { result: VerbResult; source: string };

function exitCodeOfStatus(status: number): number {
  return status === 400 ? 2 : EXIT_FAILURE;
}

/** The token, or why this command cannot send one. */
async function readToken(file: string): Promise<{ token: string } | { problem: string }> {
  let text;
  try {
    text = await Deno.readTextFile(file);
  } catch (e) {
    const problem = e instanceof Deno.errors.NotFound
      ? "does not exist"
      : e instanceof Deno.errors.PermissionDenied
      ? "is not readable by this user (run the command as root)"
      : `cannot be read: ${(e as Error).message}`;
    return { problem };
  }
  const token = text.trim();
  return token === "" ? { problem: "is empty" } : { token };
}

/** The running agent's answer, or why no agent answered. */
async function throughAgent(config: Config, request: VerbRequest): Promise<Done | string> {
  const listen = parseListenAddress(config.adminListen);
  if (listen.kind === "off") return "the admin endpoint is off";
  const address = formatListenAddress(listen);
  const query = new URLSearchParams();
  if (request.to !== undefined) query.set("to", String(request.to));
  if (request.force) query.set("force", "true");
  const path = `/v1/checkpoints/${request.id}/${request.verb}${query.size ? `?${query}` : ""}`;
  const token = await readToken(config.adminTokenFile);
  let reply;
  try {
    reply = await adminPostJson(
      listen,
      path,
      "token" in token ? token.token : undefined,
      VERB_TIMEOUT_MS,
    );
  } catch (e) {
    // What to do is the verb's to say: it goes on on disk, or says an agent holds the lock.
    return noAnswer(address, e).why;
  }
  const body = reply.body as { error?: string } & VerbResult;
  // Asked for the token this command could not send: what is wrong is on this side.
  if (reply.status === 401 && "problem" in token) {
    throw new CommandError(
      `the agent at ${address} needs its admin token, and ${config.adminTokenFile} ` +
        `${token.problem}; ${tokenFileFix(config.adminTokenFile)}`,
      EXIT_FAILURE,
    );
  }
  if (reply.status !== 200) {
    throw new CommandError(
      `the agent at ${address} refused: ${body.error ?? reply.status}`,
      exitCodeOfStatus(reply.status),
    );
  }
  return { result: body, source: `the running agent at ${address}` };
}

/** With no agent answering: on disk, under the agent's lock. */
async function onDisk(config: Config, request: VerbRequest, why: string): Promise<Done> {
  const lock = await acquireLock(config.lockFile);
  if (!isLock(lock)) {
    const pid = lock.heldBy === undefined ? "" : ` (pid ${lock.heldBy})`;
    throw new CommandError(
      `${why}, but an agent holds ${config.lockFile}${pid}: ask it through its admin endpoint ` +
        "(adminListen) or stop it first",
      EXIT_LOCKED,
    );
  }
  try {
    if (!lock.held) {
      throw new CommandError(
        `${why}, and ${lock.problem}: a running agent cannot be ruled out`,
        EXIT_FAILURE,
      );
    }
    const log = await stderrLogger(config);
    const stores = await AgentStores.open(config.stateDir, log);
    const result = await runVerb(config, stores, request, systemClock.now(), log);
    return { result, source: `the disk, under ${config.lockFile} (${why})` };
  } catch (e) {
    if (e instanceof VerbError) throw new CommandError(e.message, exitCodeOfStatus(e.status));
    throw e;
  } finally {
    await lock.release();
  }
}

function request(verb: VerbName, id: string, extra: Record<string, unknown>): VerbRequest {
  if (!parseValidId(id)) throw new UsageError(BAD_ID);
  const to = extra.to as string | undefined;
  if (to !== undefined && !/^[1-9][0-9]{0,8}$/.test(to)) {
    throw new UsageError(`--to: must be a version number, not ${JSON.stringify(to)}`);
  }
  return {
    verb,
    id,
    ...(to !== undefined ? { to: Number(to) } : {}),
    ...(extra.force === true ? { force: true } : {}),
  };
}

export function verbCommand(verb: VerbName): (args: string[]) => Promise<number> {
  return async (args) => {
    const { config, extra, positionals } = await loadConfig(args, {
      extraFlags: commandOptions(verb),
      positionals: true,
    });
    if (positionals.length !== 1) {
      throw new UsageError(
        positionals.length === 0
          ? "the checkpoint is required: NAMESPACE/NAME, as `status` lists it"
          : `one checkpoint at a time, not ${positionals.length}`,
      );
    }
    const id = positionals[0];
    const output = commandOutput(verb, extra);
    const req = request(verb, id, extra);
    const agent = await throughAgent(config, req);
    const { result, source } = typeof agent === "string" ? await onDisk(config, req, agent) : agent;
    console.log(
      output === "json"
        ? JSON.stringify({ source, ...result })
        : `source: ${source}\n${result.id}: ${result.message}`,
    );
    return EXIT_OK;
  };
}
