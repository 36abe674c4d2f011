/** Loading the configuration: defaults, the YAML file, flags, the environment, and bad input. */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { stringify } from "yaml";
import { EXIT_USAGE, exitCodeOf } from "../../lib/cli/errors.ts";
import { ConfigError } from "../../lib/config/errors.ts";
import {
  CONFIG_FLAGS,
  configAsYamlSettings,
  DEFAULTS,
  loadConfig,
  type LoadOptions,
} from "../../lib/config/load.ts";
import type { Config } from "../../lib/config/types.ts";
import { withTempDir } from "../helpers/temp_dir.ts";

const DEFAULT_CONFIG: Config = {
  kubeconfig: "/etc/kubernetes/kubeconfig",
  lockFile: "/run/ckpt-agent/lock",
  containerRuntimeEndpoint: "unix:///run/containerd/containerd.sock",
  runtimeRequestTimeoutMs: 120_000,
  checkpointGracePeriodMs: 60_000,
  nodeName: "node-1",
  kubeletUrl: "https://127.0.0.1:10250",
  kubeletConfigFile: "/var/lib/kubelet/config.yaml",
  apiTimeoutMs: 10_000,
  kubeletTimeoutMs: 5_000,
  staticPodDir: "/etc/kubernetes/manifests",
  inactiveDir: "/etc/kubernetes/inactive-manifests",
  secretsDir: "/etc/kubernetes/checkpoint-secrets",
  configmapsDir: "/etc/kubernetes/checkpoint-configmaps",
  stateDir: "/var/lib/ckpt-agent",
  pollIntervalMs: 5_000,
  refreshIntervalMs: 60_000,
  resyncIntervalMs: 600_000,
  startTimeoutMs: 120_000,
  promoteAfterMs: 60_000,
  crashLoopAfterMs: 30_000,
  checkpointVersions: 3,
  checkpointMaxBytes: 64 * 2 ** 20,
  namespaces: ["kube-system"],
  adminListen: "127.0.0.1:10280",
  adminAllowRemote: false,
  adminTokenFile: "/etc/ckpt-agent/admin-token",
  logLevel: "info",
  logFormat: "auto",
};

/** Loads with a private environment and host name, never the machine's own config file. */
function load(args: string[], opts: LoadOptions = {}) {
  return loadConfig(args, {
    env: {},
    hostname: () => "Node-1",
    defaultConfigFile: "/nonexistent/ckpt-agent/config.yaml",
    ...opts,
  });
}

/** Loads `yaml` (text or an object) as the --config file, plus extra args. */
function loadYaml(yaml: string | Record<string, unknown>, args: string[] = []) {
  return withTempDir(async (dir) => {
    const file = `${dir}/config.yaml`;
    await Deno.writeTextFile(file, typeof yaml === "string" ? yaml : stringify(yaml));
    return await load(["--config", file, ...args]);
  });
}

/** The one-line ConfigError message a load fails with; the command line exits 2 with it. */
async function usageError(run: () => Promise<unknown>): Promise<string> {
  try {
    await run();
  } catch (e) {
    assert(e instanceof ConfigError, `expected a ConfigError, got ${e}`);
    assertEquals(exitCodeOf(e), EXIT_USAGE);
    assert(!e.message.includes("\n"), `not one line: ${e.message}`);
    return e.message;
  }
  throw new Error("expected the load to fail");
}

Deno.test("defaults, with the lowercased host name as node name", async () => {
  const { config, extra, file } = await load([]);
  assertEquals(config, DEFAULT_CONFIG);
  assertEquals(extra, {});
  assertEquals(file, undefined);
});

Deno.test("the YAML file sets every key", async () => {
  const { config } = await loadYaml(`
# as an operator writes it
kubeconfig: /k/kubeconfig
lockFile: /k/lock
containerRuntimeEndpoint: /run/crio/crio.sock
runtimeRequestTimeout: 30s
checkpointGracePeriod: 0
nodeName: cp-1
kubeletUrl: https://10.0.0.1:10250
kubeletReadonlyUrl: http://127.0.0.1:10255
kubeletCaFile: /k/kubelet-ca.crt
kubeletConfigFile: /k/kubelet/config.yaml
apiTimeout: 3s
kubeletTimeout: 1500ms
staticPodDir: /k/manifests
inactiveDir: /k/inactive
secretsDir: /k/secrets
configmapsDir: /k/configmaps
stateDir: /k/state
pollInterval: 500ms
refreshInterval: 1m30s
resyncInterval: 20m
startTimeout: 5m
promoteAfter: 2m
crashLoopAfter: 45s
checkpointVersions: 5
checkpointMaxSize: 8Mi
namespace:
  - kube-system
  - kube-flannel
  - kube-system
adminListen: "[::1]:9000"
adminAllowRemote: true
adminTokenFile: /k/token
logLevel: debug
logFormat: text
`);
  assertEquals(config, {
    kubeconfig: "/k/kubeconfig",
    lockFile: "/k/lock",
    containerRuntimeEndpoint: "/run/crio/crio.sock",
    runtimeRequestTimeoutMs: 30_000,
    checkpointGracePeriodMs: 0,
    nodeName: "cp-1",
    kubeletUrl: "https://10.0.0.1:10250",
    kubeletReadonlyUrl: "http://127.0.0.1:10255",
    kubeletCaFile: "/k/kubelet-ca.crt",
    kubeletConfigFile: "/k/kubelet/config.yaml",
    apiTimeoutMs: 3_000,
    kubeletTimeoutMs: 1_500,
    staticPodDir: "/k/manifests",
    inactiveDir: "/k/inactive",
    secretsDir: "/k/secrets",
    configmapsDir: "/k/configmaps",
    stateDir: "/k/state",
    pollIntervalMs: 500,
    refreshIntervalMs: 90_000,
    resyncIntervalMs: 1_200_000,
    startTimeoutMs: 300_000,
    promoteAfterMs: 120_000,
    crashLoopAfterMs: 45_000,
    checkpointVersions: 5,
    checkpointMaxBytes: 8 * 2 ** 20,
    namespaces: ["kube-system", "kube-flannel"],
    adminListen: "[::1]:9000",
    adminAllowRemote: true,
    adminTokenFile: "/k/token",
    logLevel: "debug",
    logFormat: "text",
  });
});

Deno.test("namespace: kube-system unless the operator lists others, or '*' for every one", async () => {
  assertEquals((await load([])).config.namespaces, ["kube-system"]);
  assertEquals((await load(["--namespace", "*"])).config.namespaces, ["*"]);
  assertEquals((await loadYaml("namespace: ['*']\n")).config.namespaces, ["*"]);
  assertEquals((await loadYaml({ namespace: ["*"] }, ["--namespace", "a"])).config.namespaces, [
    "a",
  ]);
});

Deno.test("flags override the file; a repeated --namespace replaces the file's list", async () => {
  const { config } = await loadYaml(
    { pollInterval: "10s", namespace: ["a"], nodeName: "from-file", stateDir: "/from/file" },
    ["--poll-interval", "2s", "--namespace", "b", "--namespace=c", "--admin-allow-remote"],
  );
  assertEquals(config.pollIntervalMs, 2_000);
  assertEquals(config.namespaces, ["b", "c"]);
  assertEquals(config.nodeName, "from-file");
  assertEquals(config.stateDir, "/from/file");
  assertEquals(config.adminAllowRemote, true);
});

Deno.test("the original checkpointer's flags keep their names", async () => {
  const { config } = await load([
    "--kubeconfig=/a/kubeconfig",
    "--lock-file=/a/lock",
    "--container-runtime-endpoint=unix:///a/cri.sock",
    "--runtime-request-timeout=10s",
    "--checkpoint-grace-period=30s",
  ]);
  assertEquals(
    [
      config.kubeconfig,
      config.lockFile,
      config.containerRuntimeEndpoint,
      config.runtimeRequestTimeoutMs,
      config.checkpointGracePeriodMs,
    ],
    ["/a/kubeconfig", "/a/lock", "unix:///a/cri.sock", 10_000, 30_000],
  );
});

Deno.test("every bad flag value is one line naming the flag", async () => {
  const table: [string[], string][] = [
    [["--kubeconfig", "kubeconfig"], '--kubeconfig: "kubeconfig" is not an absolute path'],
    [["--lock-file="], '--lock-file: must be an absolute path, not ""'],
    [
      ["--container-runtime-endpoint", "tcp://1.2.3.4:1"],
      '--container-runtime-endpoint: "tcp://1.2.3.4:1" is not a unix socket (unix:///path or /path)',
    ],
    [["--runtime-request-timeout", "0s"], "--runtime-request-timeout: must be longer than 0"],
    [
      ["--runtime-request-timeout", "25h"],
      '--runtime-request-timeout: "25h" is longer than 24h0m0s',
    ],
    [["--checkpoint-grace-period=-1s"], '--checkpoint-grace-period: "-1s" is negative'],
    [
      ["--checkpoint-grace-period", "-1s"],
      "Option '--checkpoint-grace-period' argument is ambiguous. ",
    ],
    [
      ["--checkpoint-grace-period", "60"],
      '--checkpoint-grace-period: "60" has no unit; write e.g. "60s"',
    ],
    [
      ["--poll-interval", "5 seconds"],
      '--poll-interval: "5 seconds" is not a duration (e.g. "90s", "1m30s", "500ms")',
    ],
    [["--refresh-interval", "0"], "--refresh-interval: must be longer than 0"],
    [
      ["--node-name", "Node_1"],
      '--node-name: "Node_1" is not a valid node name (lowercase DNS subdomain)',
    ],
    [["--kubelet-url", "ftp://x"], '--kubelet-url: "ftp://x" is not an http(s) URL'],
    [
      ["--kubelet-readonly-url", "127.0.0.1:10255"],
      '--kubelet-readonly-url: "127.0.0.1:10255" is not an http(s) URL',
    ],
    [["--kubelet-ca-file", "ca.crt"], '--kubelet-ca-file: "ca.crt" is not an absolute path'],
    [["--static-pod-dir", "./m"], '--static-pod-dir: "./m" is not an absolute path'],
    [["--inactive-dir", "i"], '--inactive-dir: "i" is not an absolute path'],
    [["--secrets-dir", "s"], '--secrets-dir: "s" is not an absolute path'],
    [["--configmaps-dir", "c"], '--configmaps-dir: "c" is not an absolute path'],
    [["--state-dir", "d"], '--state-dir: "d" is not an absolute path'],
    [
      ["--namespace", "kube-system", "--namespace", "Kube"],
      '--namespace: item 1: "Kube" is not a valid namespace name',
    ],
    [
      ["--namespace", "kube-system", "--namespace", "*"],
      '--namespace: item 1: "*" (every namespace) stands alone, not beside other namespaces',
    ],
    [
      ["--admin-listen", "10280"],
      '--admin-listen: "10280" is not one of host:port, [ipv6]:port, unix:/path or off',
    ],
    [["--admin-listen", ":10280"], '--admin-listen: ":10280": "" is not a host or IP address'],
    [
      ["--admin-listen", "[::1]:99999"],
      '--admin-listen: "[::1]:99999": port 99999 is out of range',
    ],
    [
      ["--admin-listen", "[127.0.0.1]:1"],
      '--admin-listen: "[127.0.0.1]:1": "127.0.0.1" is not a host or IP address',
    ],
    [
      ["--admin-listen", "300.0.0.1:1"],
      '--admin-listen: "300.0.0.1:1": "300.0.0.1" is not a host or IP address',
    ],
    [
      ["--admin-listen", "unix:sock"],
      '--admin-listen: "unix:sock": the socket path must be absolute',
    ],
    [["--admin-token-file", "token"], '--admin-token-file: "token" is not an absolute path'],
    [
      ["--checkpoint-max-size", "lots"],
      '--checkpoint-max-size: "lots" is not a size in bytes (e.g. "64Mi", "1Gi")',
    ],
    [["--checkpoint-max-size", "512Ki"], '--checkpoint-max-size: "512Ki" is less than 1Mi'],
    [["--admin-allow-remote=yes"], "Option '--admin-allow-remote' does not take an argument"],
    [["--poll-intervall", "5s"], "Unknown option '--poll-intervall'"],
    [["--config", ""], "--config: must be a file path"],
  ];
  for (const [args, message] of table) {
    const got = await usageError(() => load(args));
    assert(got.startsWith(message), `${args.join(" ")}:\n got ${got}\nwant ${message}`);
  }
});

Deno.test("every bad YAML value is one line naming the file, the line and column, and the key", async () => {
  const table: [Record<string, unknown>, string][] = [
    [{ kubeconfig: 5 }, "kubeconfig: must be an absolute path, not 5"],
    [{ lockFile: null }, "lockFile: must be an absolute path, not nothing"],
    [{ pollInterval: 5 }, 'pollInterval: 5 has no unit (seconds? milliseconds?); write e.g. "5s"'],
    [
      { refreshInterval: 1.5 },
      'refreshInterval: 1.5 has no unit (seconds? milliseconds?); write e.g. "1.5s"',
    ],
    [
      { runtimeRequestTimeout: ["1s"] },
      'runtimeRequestTimeout: must be a duration such as "90s" or "1m30s", not a list',
    ],
    [
      { checkpointGracePeriod: "1x" },
      'checkpointGracePeriod: "1x" is not a duration (e.g. "90s", "1m30s", "500ms")',
    ],
    [{ nodeName: "" }, 'nodeName: must be a node name, not ""'],
    [
      { checkpointMaxSize: 1.5 },
      'checkpointMaxSize: 1.5 is not a size in bytes (e.g. "64Mi", "1Gi")',
    ],
    [{ kubeletUrl: "https://" }, 'kubeletUrl: "https://" is not an http(s) URL'],
    [{ kubeletCaFile: true }, "kubeletCaFile: must be an absolute path, not true"],
    [
      { namespace: "kube-system" },
      'namespace: must be a list of namespace names, not "kube-system"',
    ],
    [{ namespace: ["ok", 7] }, "namespace: item 1: 7 is not a valid namespace name"],
    [
      { namespace: [] },
      "namespace: an empty list names no namespace: list the namespaces parents may come from, " +
      'or "*" for every namespace',
    ],
    [
      { namespace: ["*", "kube-system"] },
      'namespace: item 0: "*" (every namespace) stands alone, not beside other namespaces',
    ],
    [
      { adminListen: { host: "x" } },
      "adminListen: must be host:port, [ipv6]:port, unix:/path or off, not a mapping",
    ],
    [{ adminAllowRemote: "true" }, 'adminAllowRemote: must be true or false, not "true"'],
    [{ logLevel: "verbose" }, 'logLevel: must be one of debug, info, warn, error, not "verbose"'],
    [{ logFormat: "logfmt" }, 'logFormat: must be one of auto, text, json, not "logfmt"'],
    [{ pollIntervall: "5s" }, "pollIntervall: unknown key (did you mean pollInterval?)"],
    [{ "lock-file": "/x" }, "lock-file: unknown key (did you mean lockFile?)"],
    [{ nonsense: 1 }, "nonsense: unknown key"],
  ];
  for (const [doc, message] of table) {
    const got = await usageError(() => loadYaml(doc));
    // The place is that of the value: the key's line, or the next for a block list or mapping.
    const at = /^\/.*\/config\.yaml:[12]:\d+: /;
    assert(at.test(got), got);
    assertEquals(got.replace(at, ""), message);
  }
});

Deno.test("a file that is not a mapping of settings", async () => {
  assert(
    (await usageError(() => loadYaml("- a\n- b\n"))).endsWith(
      "must be a mapping of settings, not a list",
    ),
  );
  assert((await usageError(() => loadYaml("just text\n"))).endsWith('not "just text"'));
  assert((await usageError(() => loadYaml("a: [\n"))).includes(": not valid YAML: "));
  assert((await usageError(() => loadYaml("a: 1\na: 2\n"))).includes(": not valid YAML: "));
  // Empty, or only comments: no settings, all defaults.
  assertEquals((await loadYaml("# nothing set\n")).config, DEFAULT_CONFIG);
});

Deno.test("unset optional keys in YAML leave the default: no read-only port, the cluster CA", async () => {
  const { config } = await loadYaml("kubeletReadonlyUrl:\nkubeletCaFile: null\n");
  assertEquals(config, DEFAULT_CONFIG);
  // For the kubelet CA, off is not the default: it turns verification off.
  assertEquals(
    (await loadYaml("kubeletReadonlyUrl: off\nkubeletCaFile: off\n")).config,
    { ...DEFAULT_CONFIG, kubeletCaFile: "off" },
  );
});

Deno.test("off as a flag turns off an optional feature the file turned on", async () => {
  const yaml =
    "kubeletReadonlyUrl: http://127.0.0.1:10255\nkubeletCaFile: /etc/kubernetes/pki/ca.crt\n";
  const { config } = await loadYaml(yaml, [
    "--kubelet-readonly-url",
    "off",
    "--kubelet-ca-file=off",
  ]);
  assertEquals(config, { ...DEFAULT_CONFIG, kubeletCaFile: "off" });
});

Deno.test("the API server and kubelet timeouts: flags, and no zero, no unitless number", async () => {
  const { config } = await load(["--api-timeout", "2s", "--kubelet-timeout=750ms"]);
  assertEquals([config.apiTimeoutMs, config.kubeletTimeoutMs], [2_000, 750]);
  assertEquals(
    await usageError(() => load(["--api-timeout", "0s"])),
    "--api-timeout: must be longer than 0",
  );
  const unitless = await usageError(() => loadYaml({ kubeletTimeout: 5 }));
  assert(
    unitless.endsWith(': kubeletTimeout: 5 has no unit (seconds? milliseconds?); write e.g. "5s"'),
    unitless,
  );
});

Deno.test("a missing --config file is an error, a missing default file is not", async () => {
  await withTempDir(async (dir) => {
    const message = await usageError(() => load(["--config", `${dir}/absent.yaml`]));
    assert(message.startsWith(`--config: cannot read ${dir}/absent.yaml: `), message);

    assertEquals(
      (await load([], { defaultConfigFile: `${dir}/absent.yaml` })).config,
      DEFAULT_CONFIG,
    );

    await Deno.writeTextFile(`${dir}/default.yaml`, "pollInterval: 1s\n");
    const found = await load([], { defaultConfigFile: `${dir}/default.yaml` });
    assertEquals(found.config.pollIntervalMs, 1_000);
    assertEquals(found.file, `${dir}/default.yaml`);

    // Present but unreadable is an error even for the default file.
    await Deno.mkdir(`${dir}/a-directory.yaml`);
    await usageError(() => load([], { defaultConfigFile: `${dir}/a-directory.yaml` }));
  });
});

Deno.test("the agent's directories must be distinct", async () => {
  assertEquals(
    await usageError(() => load(["--inactive-dir", "/etc/kubernetes/manifests/"])),
    "--inactive-dir: /etc/kubernetes/manifests is also staticPodDir",
  );
  const fromFile = await usageError(() => loadYaml({ stateDir: "/s", secretsDir: "/s" }));
  assert(fromFile.endsWith("config.yaml: stateDir: /s is also secretsDir"), fromFile);
  assertEquals(
    await usageError(() => loadYaml({ secretsDir: "/s" }, ["--configmaps-dir", "/s"])),
    "--configmaps-dir: /s is also secretsDir",
  );
});

Deno.test("a non-loopback admin address is refused naming the key, unless remote is allowed", async () => {
  const refusal = (address: string) =>
    `${JSON.stringify(address)} is not a loopback address; binding it needs adminAllowRemote ` +
    "(--admin-allow-remote)";
  for (const address of ["0.0.0.0:10280", "192.0.2.10:10280", "[::]:10280", "node-1:10280"]) {
    assertEquals(
      await usageError(() => load(["--admin-listen", address])),
      `--admin-listen: ${refusal(address)}`,
    );
    const fromFile = await usageError(() => loadYaml({ adminListen: address }));
    assert(fromFile.endsWith(`config.yaml: adminListen: ${refusal(address)}`), fromFile);
    for (
      const allowed of [
        load(["--admin-listen", address, "--admin-allow-remote"]),
        loadYaml({ adminListen: address, adminAllowRemote: true }),
        loadYaml({ adminListen: address }, ["--admin-allow-remote"]),
      ]
    ) assertEquals((await allowed).config.adminListen, address);
  }
  for (const address of ["127.0.0.1:10280", "[::1]:1", "localhost:10280", "unix:/x.sock", "off"]) {
    assertEquals((await load(["--admin-listen", address])).config.adminListen, address);
  }
});

Deno.test("self identity and node name from the environment", async () => {
  const env = { NODE_NAME: "cp-2", POD_NAME: "ckpt-cp-2", POD_NAMESPACE: "kube-system" };
  const pod = await load([], { env });
  assertEquals(pod.config.nodeName, "cp-2");
  assertEquals(pod.config.self, {
    nodeName: "cp-2",
    podName: "ckpt-cp-2",
    podNamespace: "kube-system",
  });

  // A node name given explicitly wins for the agent; self keeps NODE_NAME, as the original did.
  const flag = await load(["--node-name", "cp-9"], { env });
  assertEquals(flag.config.nodeName, "cp-9");
  assertEquals(flag.config.self?.nodeName, "cp-2");

  // Without NODE_NAME, self takes the node name.
  const noNode = await load([], { env: { POD_NAME: "ckpt", POD_NAMESPACE: "ns" } });
  assertEquals(noNode.config.self, { nodeName: "node-1", podName: "ckpt", podNamespace: "ns" });

  // Both pod variables are needed; empty counts as unset.
  for (
    const partial of [{ POD_NAME: "ckpt" }, { POD_NAMESPACE: "ns" }, {
      POD_NAME: "",
      POD_NAMESPACE: "ns",
    }]
  ) {
    assertEquals((await load([], { env: partial })).config.self, undefined);
  }
  assertEquals((await load([], { env: { NODE_NAME: "cp-3" } })).config, {
    ...DEFAULT_CONFIG,
    nodeName: "cp-3",
  });

  assertEquals(
    await usageError(() => load([], { env: { NODE_NAME: "CP 3" } })),
    'NODE_NAME: "CP 3" is not a valid node name (lowercase DNS subdomain)',
  );
  assertEquals(
    await usageError(() => load([], { env: { POD_NAME: "a", POD_NAMESPACE: "Kube" } })),
    'POD_NAMESPACE: "Kube" is not a valid namespace name',
  );
  assertEquals(
    await usageError(() => load([], { hostname: () => "host_with_underscore" })),
    '--node-name: not set, and the host name "host_with_underscore" is not a valid node name (lowercase DNS subdomain)',
  );
});

Deno.test("a command's own flags come back as extra", async () => {
  const { config, extra } = await load(["--once", "--output=json", "--poll-interval=1s"], {
    extraFlags: {
      once: { type: "boolean" },
      output: { type: "string" },
      "dry-run": { type: "boolean" },
    },
  });
  assertEquals(extra, { once: true, output: "json", "dry-run": undefined });
  assertEquals(config.pollIntervalMs, 1_000);
});

Deno.test("the printed configuration loads back to the same configuration", async () => {
  const { config } = await loadYaml({
    checkpointGracePeriod: "1.5s",
    kubeletCaFile: "/ca.crt",
    namespace: ["kube-system"],
    adminListen: "unix:/run/ckpt-agent.sock",
  });
  assertEquals((await loadYaml(configAsYamlSettings(config))).config, config);
  assertEquals((await loadYaml(configAsYamlSettings(DEFAULT_CONFIG))).config, DEFAULT_CONFIG);
});

Deno.test("DEFAULTS and the flags cover the same keys", () => {
  const keys = Object.keys(configAsYamlSettings(DEFAULT_CONFIG));
  assertEquals(keys, [
    ...Object.keys(DEFAULTS).slice(0, 5),
    "nodeName",
    ...Object.keys(DEFAULTS).slice(5),
  ]);
  // Every YAML key has a flag (plus --config), the key in kebab case.
  const kebab = (key: string) => key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
  const flags = ["config", ...[...keys, "kubeletReadonlyUrl", "kubeletCaFile"].map(kebab)];
  assertEquals(Object.keys(CONFIG_FLAGS).sort(), flags.sort());
});
