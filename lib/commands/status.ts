/**
 * `ckpt-agent status`: the checkpoints and their states, from the running agent's admin endpoint,
 * or, when no agent answers there, from the state directory, read without opening the store (no
 * sweep, no quarantine: a running agent may own it). The output says which source it used.
 */
import * as v from "valibot";
import { check, looseObject, number, object } from "../core/schema.ts";
import { adminGetJson, noAnswer } from "../admin/client.ts";
import { formatListenAddress, parseListenAddress } from "../admin/listen.ts";
import { type CheckpointVersions, checkpointView } from "../admin/views.ts";
import { commandOptions, commandOutput } from "../cli/commands.ts";
import { CommandError, EXIT_FAILURE, EXIT_OK } from "../cli/errors.ts";
import { loadConfig } from "../config/load.ts";
import type { Config } from "../config/types.ts";
import { manifestFilesOnDisk } from "../disk/manifests.ts";
import { versionsView } from "../disk/versions.ts";
import { readStatusRecords } from "../store/status_store.ts";

/** The fields the table needs; the rest of each view is passed through as the agent sent it. */
const AgentCheckpointsSchema = object({
  checkpoints: v.array(looseObject({
    id: v.string(),
    state: v.string(),
    since: v.string(),
    graceEnd: v.optional(v.string()),
    versions: v.optional(looseObject({
      kept: v.optional(number()),
      versions: v.array(number()),
      inheritedFrom: v.optional(looseObject({ id: v.string(), version: number() })),
      pinned: v.optional(looseObject({ pinnedAt: v.string() })),
      candidate: v.optional(looseObject({
        version: number(),
        seenAt: v.string(),
        waiting: v.optional(v.string()),
        crashLooping: v.optional(v.literal(true)),
      })),
    })),
  })),
});

/** A checkpoint as listed: a CheckpointView, of which the table needs these fields. */
interface Row {
  id: string;
  state: string;
  since: string;
  graceEnd?: string;
  versions?: CheckpointVersions;
}

export type Listing =
  | { source: "agent"; address: string; checkpoints: Row[] }
  | { source: "state-dir"; stateDir: string; why: string; checkpoints: Row[] };

/** The agent's answer, or why there is none. */
async function askAgent(config: Config): Promise<Listing | string> {
  const listen = parseListenAddress(config.adminListen);
  if (listen.kind === "off") return "the admin endpoint is off";
  const address = formatListenAddress(listen);
  let reply;
  try {
    reply = await adminGetJson(listen, "/v1/checkpoints");
  } catch (e) {
    const { why, todo } = noAnswer(address, e);
    return `${why}; ${todo}`;
  }
  if (reply.status !== 200) return `the agent at ${address} answered ${reply.status}`;
  const parsed = check(AgentCheckpointsSchema, reply.body);
  if (!parsed.success) return `the agent at ${address} sent an answer of another shape`;
  return { source: "agent", address, checkpoints: parsed.output.checkpoints };
}

async function readStateDir(config: Config, why: string): Promise<Listing> {
  let records;
  try {
    records = await readStatusRecords(config.stateDir);
  } catch (e) {
    throw new CommandError(
      `${why}, and the state directory ${config.stateDir} cannot be read: ${(e as Error).message}`,
      EXIT_FAILURE,
    );
  }
  // Unreadable manifest dirs leave every path as bootkube names it.
  const files = await manifestFilesOnDisk(config).catch(() => new Map<string, string>());
  const versionsOf = (id: string) => {
    const file = files.get(id);
    return file === undefined
      ? Promise.resolve(undefined)
      : versionsView(config, id, file).catch(() => undefined);
  };
  return {
    source: "state-dir",
    stateDir: config.stateDir,
    why,
    checkpoints: await Promise.all(
      records.map(async (record) =>
        checkpointView(record, config, files.get(record.id), await versionsOf(record.id))
      ),
    ),
  };
}

export async function listCheckpoints(config: Config): Promise<Listing> {
  const answer = await askAgent(config);
  return typeof answer === "string" ? await readStateDir(config, answer) : answer;
}

/**
 * The version in place, whether it is pinned, and the predecessor's version it was inherited
 * from: `1 pinned (from kube-system/kube-apiserver-7x2kq v2)`.
 */
function versionText(versions: Row["versions"]): string {
  if (versions?.kept === undefined) return "-";
  const from = versions.inheritedFrom;
  return `${versions.kept}${versions.pinned ? " pinned" : ""}` +
    (from ? ` (from ${from.id} v${from.version})` : "");
}

/**
 * The candidate and since when it was seen, and, when the agent says, why it waits and whether
 * its parent crash-loops on it: `2 since 2026-03-01T10:06:00Z (not Ready; crash-looping)`.
 */
function candidateText(versions: Row["versions"]): string {
  const candidate = versions?.candidate;
  if (!candidate) return "-";
  const said = [candidate.waiting, candidate.crashLooping ? "crash-looping" : undefined]
    .filter((s) => s);
  return `${candidate.version} since ${candidate.seenAt}` +
    (said.length > 0 ? ` (${said.join("; ")})` : "");
}

function table(rows: string[][]): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((row) => row[i].length)));
  return rows.map((row) => row.map((cell, i) => cell.padEnd(widths[i])).join("  ").trimEnd())
    .join("\n");
}

export function formatListing(listing: Listing): string {
  const source = listing.source === "agent"
    ? `source: the running agent at ${listing.address}`
    : `source: the state directory ${listing.stateDir}, read-only (${listing.why})`;
  if (listing.checkpoints.length === 0) return `${source}\nno checkpoints`;
  return `${source}\n${
    table([
      ["ID", "STATE", "SINCE", "DEADLINE", "VERSION", "KEPT", "CANDIDATE"],
      ...listing.checkpoints.map((c) => [
        c.id,
        c.state,
        c.since,
        c.graceEnd ?? "-",
        versionText(c.versions),
        c.versions?.versions.join(",") || "-",
        candidateText(c.versions),
      ]),
    ])
  }`;
}

export async function statusCommand(args: string[]): Promise<number> {
  const { config, extra } = await loadConfig(args, {
    extraFlags: commandOptions("status"),
  });
  const output = commandOutput("status", extra);
  const listing = await listCheckpoints(config);
  console.log(output === "json" ? JSON.stringify(listing) : formatListing(listing));
  return EXIT_OK;
}
