/** Record builders and hand-corrupted record files, shared by the store and verify tests. */
import { join } from "node:path";
import type { AgentStores } from "../../lib/store/agent_stores.ts";
import { encodeRecord, type RecordProblem } from "../../lib/store/envelope.ts";
import { SandboxStore } from "../../lib/store/sandbox_store.ts";
import { StatusStore } from "../../lib/store/status_store.ts";
import type { StatusRecord } from "../../lib/store/status_record.ts";
import {
  newSandboxCheckpoint,
  type SandboxCheckpoint,
} from "../../lib/store/sandbox_checkpoint.ts";

export async function withStateDir(fn: (stateDir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir();
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

export function statusRecord(id: string, extra: Partial<StatusRecord> = {}): StatusRecord {
  return {
    id,
    state: "inactive",
    createdAt: "2026-01-01T00:00:00Z",
    reason: "Tracked",
    message: "found on disk",
    ...extra,
  };
}

export function sandboxCheckpoint(name = "kube-apiserver"): SandboxCheckpoint {
  return {
    ...newSandboxCheckpoint("kube-system", name, `/var/run/netns/cni-${name}`),
    hostBridge: "cni0",
    portMappings: [
      { protocol: "tcp", containerPort: 6443, hostPort: 6443 },
      { protocol: "sctp", containerPort: 9000, hostPort: 0 },
    ],
    interfaces: [
      { name: "eth0", address: "10.244.0.5/24" },
      { name: "eth0", address: "fd00:10:244::5/64" },
    ],
  };
}

/** An encoded record whose envelope or payload was edited after encoding. */
function edited(
  kind: "status" | "sandbox-checkpoint",
  data: unknown,
  edit: (envelope: Record<string, unknown>) => void,
): string {
  const envelope = JSON.parse(encodeRecord(kind, data));
  edit(envelope);
  return JSON.stringify(envelope, null, 2);
}

export interface CorruptFile {
  name: string;
  code: RecordProblem;
  /** A string or bytes for a file; null for a directory. */
  content: string | Uint8Array | null;
}

/** One status file for every way a record can be unsound. */
export function corruptStatusFiles(): CorruptFile[] {
  const valid = (id: string) => encodeRecord("status", statusRecord(id));
  return [
    { name: "ns_torn.json", code: "bad-json", content: valid("ns/torn").slice(0, 60) },
    { name: "ns_empty.json", code: "bad-json", content: "" },
    { name: "ns_binary.json", code: "bad-json", content: new Uint8Array([0xff, 0xfe, 0x7b]) },
    {
      name: "ns_no-sum.json",
      code: "bad-envelope",
      content: edited("status", statusRecord("ns/no-sum"), (e) => delete e.sha256),
    },
    { name: "ns_array.json", code: "bad-envelope", content: "[1, 2, 3]\n" },
    {
      name: "ns_future.json",
      code: "unknown-version",
      content: edited("status", statusRecord("ns/future"), (e) => e.version = "v2"),
    },
    {
      name: "ns_sandbox.json",
      code: "wrong-kind",
      content: encodeRecord("sandbox-checkpoint", { sandboxId: "abc", checkpoint: {} }),
    },
    {
      name: "ns_altered.json",
      code: "checksum",
      content: edited("status", statusRecord("ns/altered"), (e) => {
        (e.data as Record<string, unknown>).state = "active";
      }),
    },
    {
      name: "ns_mistyped.json",
      code: "invalid-field",
      content: encodeRecord("status", { ...statusRecord("ns/mistyped"), createdAt: 1767225600 }),
    },
    {
      name: "ns_grace.json",
      code: "invalid-field",
      content: encodeRecord("status", statusRecord("ns/grace", { state: "active-grace" })),
    },
    {
      name: "ns_removing.json",
      code: "invalid-field",
      content: encodeRecord("status", { ...statusRecord("ns/removing"), removing: true }),
    },
    { name: "ns_elsewhere.json", code: "misplaced", content: valid("ns/other") },
    { name: "notes.txt", code: "bad-name", content: "not a record\n" },
    { name: "Upper_Case.json", code: "bad-name", content: valid("ns/x") },
    { name: "ns_dir.json", code: "not-a-file", content: null },
  ];
}

/** One sandbox file for a few ways a sandbox record can be unsound. */
export function corruptSandboxFiles(): CorruptFile[] {
  const record = (sandboxId: string, checkpoint: unknown = sandboxCheckpoint()) =>
    encodeRecord("sandbox-checkpoint", { sandboxId, checkpoint });
  return [
    { name: "torn.json", code: "bad-json", content: record("torn").slice(0, 100) },
    {
      name: "badcidr.json",
      code: "invalid-field",
      content: record("badcidr", {
        ...sandboxCheckpoint(),
        interfaces: [{ name: "eth0", address: "10.0.0.5" }],
      }),
    },
    {
      name: "badproto.json",
      code: "invalid-field",
      content: record("badproto", {
        ...sandboxCheckpoint(),
        portMappings: [{ protocol: "icmp", containerPort: 1, hostPort: 0 }],
      }),
    },
    { name: "moved.json", code: "misplaced", content: record("other") },
    { name: "a b.json", code: "bad-name", content: record("a b") },
  ];
}

export async function plant(dir: string, files: CorruptFile[]): Promise<void> {
  await Deno.mkdir(dir, { recursive: true });
  for (const file of files) {
    const path = join(dir, file.name);
    if (file.content === null) await Deno.mkdir(path);
    else if (typeof file.content === "string") await Deno.writeTextFile(path, file.content);
    else await Deno.writeFile(path, file.content);
  }
}

export async function listDir(dir: string): Promise<string[]> {
  const names: string[] = [];
  try {
    for await (const entry of Deno.readDir(dir)) names.push(entry.name);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  return names.sort();
}

/** The records of a state dir, as a fresh agent would read them: status records and sandbox ids. */
export async function onDisk(stateDir: string) {
  const status = await StatusStore.open(stateDir);
  const sandboxes = await SandboxStore.open(stateDir);
  return {
    status: status.list().map(({ phase: _, ...record }) => record),
    sandboxes: sandboxes.list(),
  };
}

/** What the agent holds, in the form of `onDisk`. */
export function held(stores: AgentStores) {
  return {
    status: stores.status.list().map(({ phase: _, ...record }) => record),
    sandboxes: stores.sandboxes.list(),
  };
}
