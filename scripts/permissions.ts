/**
 * The permissions the compiled agent gets, and nothing else: `deno compile` bakes them into the
 * binary, and every command of it (run, --once, snapshot, verify, demo, version…) runs with
 * them. Each flag is here for a reason the agent cannot do without; tests/packaging/
 * permissions_test.ts runs the agent from source with exactly these flags against a simulated
 * node, so a flag that goes missing fails a test rather than a production node.
 */
export interface PermissionFlag {
  flag: string;
  why: string;
}

export const AGENT_PERMISSIONS: readonly PermissionFlag[] = [
  {
    flag: "--allow-read",
    why: "the config file, kubeconfig, certificates and keys, both manifest directories, the " +
      "stored secrets and configmaps, the state directory and lock file, and the CRI socket — " +
      "all at paths the configuration chooses at run time",
  },
  {
    flag: "--allow-write",
    why: "manifests, secret and configmap files (and their owners), state records, the lock " +
      "file, the CRI socket and systemd's notification socket (connecting or sending to a unix " +
      "socket needs write access to it) — at paths the configuration and systemd choose at run " +
      "time",
  },
  {
    flag: "--allow-net",
    why: "the API server and the kubelet at whatever address the kubeconfig and configuration " +
      "give, the CRI runtime's unix socket and systemd's notification socket (Deno checks unix " +
      "sockets as network access), and the admin endpoint's listening address",
  },
  {
    flag: "--allow-env",
    why: "NODE_NAME, POD_NAME and POD_NAMESPACE for the configuration; the YAML library also " +
      "reads its LOG_STREAM and LOG_TOKENS variables while it parses the config file",
  },
  {
    flag: "--allow-sys=hostname,statfs,uid",
    why: "the node name defaults to the host name, as the kubelet's does; `doctor` asks each " +
      "configured directory's file system how much room is free (statfs); the agent trusts " +
      "only directories of its trees that belong to root or to itself, and makes them its own " +
      "(uid)",
  },
];

/**
 * V8 flags baked in with the permissions: not permissions, but how the daemon keeps its memory
 * small (docs/benchmarks.md, "Node pass", measured with 1,000 parents).
 */
export const AGENT_V8_FLAGS: readonly PermissionFlag[] = [
  {
    flag: "--max-semi-space-size=1",
    why: "V8 grew its young generation to 50-60 MB on the garbage of each pass; capped at 1 MB " +
      "per semi-space, steady passes take as long as before",
  },
  {
    flag: "--expose-gc",
    why: "gives the daemon gc(), with which it returns each pass's garbage to the kernel while " +
      "it waits for the next pass (lib/daemon/memory.ts)",
  },
];

/**
 * Deno flags that are neither permissions nor V8's: how the runtime itself keeps the daemon small
 * (docs/benchmarks.md, "Node pass").
 */
export const AGENT_RUNTIME_FLAGS: readonly PermissionFlag[] = [
  {
    flag: "--no-code-cache",
    why: "with V8's code cache, each module's cached code (functions otherwise compiled only " +
      "when first called) is loaded with it, and the cache's database stays mapped: 3-4 MiB " +
      "more RSS for the daemon at 10 parents, for a first pass as fast within the noise " +
      "(0.9-1.5 s either way)",
  },
];

/**
 * glibc allocator settings the systemd unit gives the daemon (Environment= in
 * systemd/ckpt-agent.service; a test keeps the two equal), and with which the benchmarks run it.
 * glibc reads them when the process starts, so they cannot be baked into the binary.
 */
export const AGENT_MALLOC_ENV: Readonly<Record<string, string>> = {
  // Two arenas for Deno's thirty-odd I/O threads instead of up to one each.
  MALLOC_ARENA_MAX: "2",
  // Blocks of 32 KiB and more (socket reads, list bodies) are mapped and unmapped on their own;
  // a fixed threshold also stops glibc from raising it each time a large block is freed.
  MALLOC_MMAP_THRESHOLD_: "32768",
  // Free memory at the top of the heap goes back to the kernel at once.
  MALLOC_TRIM_THRESHOLD_: "0",
};

/**
 * The Deno flags the agent runs with, compiled (baked in by `deno compile`) or from source
 * (`deno task demo`, `deno task agent-strict`): its permissions, and a missing one is an error,
 * never a prompt on an operator's terminal; then the runtime's and V8's flags. The unstable
 * "net" feature the agent needs (lib/daemon/notify_socket.ts) is no flag here: deno.json's
 * `unstable` turns it on for every deno command run in this tree, and `deno compile` bakes it in.
 */
export function agentDenoFlags(): string[] {
  return [
    "--no-prompt",
    ...AGENT_PERMISSIONS.map((p) => p.flag),
    ...AGENT_RUNTIME_FLAGS.map((f) => f.flag),
    `--v8-flags=${AGENT_V8_FLAGS.map((f) => f.flag).join(",")}`,
  ];
}
