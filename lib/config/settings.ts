/**
 * Every setting of the agent, one entry each. From this table come the Config type
 * (lib/config/types.ts), the loader's checks and flags and the effective-config printer
 * (lib/config/load.ts), the settings part of every command's help (lib/cli/help.ts) and the
 * default configuration file systemd/config.yaml (lib/config/config_file.ts).
 *
 * To add a setting: add its entry below, where `ckpt-agent config` should print it, with a kind
 * from lib/config/kinds.ts (or a new one there) and a Config field that does not exist yet; then
 * use the field where the agent needs it. Whoever builds a configuration in code starts from
 * defaultConfig (lib/config/load.ts), so a setting with a default needs nothing more; the type
 * checker names a test that spells a whole Config out. Two files are kept to the table by tests
 * and must follow: README.md's configuration table (tests/config/settings_test.ts shows the row it wants)
 * and systemd/config.yaml (`deno run -A scripts/config_file.ts` writes it).
 */
import { LEVELS, LOG_FORMATS } from "../util/log.ts";
import {
  absolutePath,
  boolean,
  byteSize,
  count,
  DAY_MS,
  duration,
  httpUrl,
  type Kind,
  kubeletCaFile,
  listenAddress,
  namespaceList,
  nodeName,
  oneOf,
  optional,
  runtimeEndpoint,
} from "./kinds.ts";

export interface Setting<V, F extends string> {
  /** The flag, without its dashes. */
  flag: string;
  kind: Kind<V>;
  /** The Config field the value feeds; optional there when the kind allows no value. */
  field: F;
  /** As the YAML file writes it; absent when the default depends on the node or is "unset". */
  default?: unknown;
  /** How the help and the README say the default when the value alone would not tell. */
  defaultText?: string;
  /** One line: the README table's meaning column, also the help's and the config file's. */
  help: string;
  /** A directory the agent writes into: no two of them may be the same directory. */
  ownDir?: true;
}

function setting<V, const F extends string>(s: Setting<V, F>): Setting<V, F> {
  return s;
}

const timeout = duration({ positive: true, maxMs: DAY_MS });

/** In the order `ckpt-agent config` prints them. */
export const SETTINGS = {
  // The first five flags are the original checkpointer's, so unit files carry over.
  kubeconfig: setting({
    flag: "kubeconfig",
    kind: absolutePath,
    field: "kubeconfig",
    default: "/etc/kubernetes/kubeconfig",
    help:
      "API server URL and credentials (CA, client cert/key, token or tokenFile; also used for the kubelet)",
  }),
  lockFile: setting({
    flag: "lock-file",
    kind: absolutePath,
    field: "lockFile",
    // The unit's RuntimeDirectory, 0700: in a directory others can write, as /run/lock, a local
    // user could hold the lock and keep the agent out (docs/design.md#lock).
    default: "/run/ckpt-agent/lock",
    help: "lock file that keeps a second agent off this node (flock), in a directory root's alone",
  }),
  containerRuntimeEndpoint: setting({
    flag: "container-runtime-endpoint",
    kind: runtimeEndpoint,
    field: "containerRuntimeEndpoint",
    default: "unix:///run/containerd/containerd.sock",
    help: "CRI socket of the container runtime (`unix:///path`, or a bare path)",
  }),
  runtimeRequestTimeout: setting({
    flag: "runtime-request-timeout",
    kind: timeout,
    field: "runtimeRequestTimeoutMs",
    default: "2m",
    help: "deadline of each CRI call",
  }),
  checkpointGracePeriod: setting({
    flag: "checkpoint-grace-period",
    kind: duration({ positive: false }),
    field: "checkpointGracePeriodMs",
    default: "1m",
    help: "how long a deleted parent's checkpoint is kept (0 allowed)",
  }),
  nodeName: setting({
    flag: "node-name",
    kind: nodeName,
    field: "nodeName",
    // NODE_NAME, else the lowercased host name (lib/config/load.ts).
    defaultText: "the host name",
    help: "this node, as the API server knows it",
  }),
  kubeletUrl: setting({
    flag: "kubelet-url",
    kind: httpUrl,
    field: "kubeletUrl",
    default: "https://127.0.0.1:10250",
    help: "the kubelet's secure port",
  }),
  kubeletReadonlyUrl: setting({
    flag: "kubelet-readonly-url",
    kind: optional(httpUrl),
    field: "kubeletReadonlyUrl",
    defaultText: "off",
    help:
      "the kubelet's read-only port (e.g. `http://127.0.0.1:10255`), asked when the secure port fails, or `off`",
  }),
  kubeletCaFile: setting({
    flag: "kubelet-ca-file",
    kind: kubeletCaFile,
    field: "kubeletCaFile",
    // A kubelet this CA does not verify is asked with the client certificate only, never a
    // token; KUBELET_CA_OFF asks it unverified (lib/sources/kubelet.ts).
    defaultText: "the kubeconfig's cluster CA",
    help:
      "CA of the kubelet's serving certificate (e.g. `/var/lib/kubelet/pki/kubelet.crt`), or `off`: not verified",
  }),
  kubeletConfigFile: setting({
    flag: "kubelet-config-file",
    kind: absolutePath,
    field: "kubeletConfigFile",
    default: "/var/lib/kubelet/config.yaml",
    help:
      "the kubelet's KubeletConfiguration file, whose `staticPodPath` `ckpt-agent doctor` checks",
  }),
  apiTimeout: setting({
    flag: "api-timeout",
    kind: timeout,
    field: "apiTimeoutMs",
    default: "10s",
    help: "bound of each request to the API server, body included",
  }),
  kubeletTimeout: setting({
    flag: "kubelet-timeout",
    kind: timeout,
    field: "kubeletTimeoutMs",
    default: "5s",
    help: "bound of each request to the kubelet, each port, body included",
  }),
  staticPodDir: setting({
    flag: "static-pod-dir",
    kind: absolutePath,
    field: "staticPodDir",
    default: "/etc/kubernetes/manifests",
    help: "the kubelet's static-pod directory: active checkpoints are written here",
    ownDir: true,
  }),
  inactiveDir: setting({
    flag: "inactive-dir",
    kind: absolutePath,
    field: "inactiveDir",
    default: "/etc/kubernetes/inactive-manifests",
    help: "inactive checkpoints, ready to be activated",
    ownDir: true,
  }),
  secretsDir: setting({
    flag: "secrets-dir",
    kind: absolutePath,
    field: "secretsDir",
    default: "/etc/kubernetes/checkpoint-secrets",
    help: "stored secrets and projected volumes, one file per key",
    ownDir: true,
  }),
  configmapsDir: setting({
    flag: "configmaps-dir",
    kind: absolutePath,
    field: "configmapsDir",
    default: "/etc/kubernetes/checkpoint-configmaps",
    help: "stored configmaps, one file per key",
    ownDir: true,
  }),
  stateDir: setting({
    flag: "state-dir",
    kind: absolutePath,
    field: "stateDir",
    default: "/var/lib/ckpt-agent",
    help: "the agent's own state: status and sandbox records",
    ownDir: true,
  }),
  pollInterval: setting({
    flag: "poll-interval",
    kind: timeout,
    field: "pollIntervalMs",
    default: "5s",
    help: "time between passes when nothing asks for one sooner",
  }),
  refreshInterval: setting({
    flag: "refresh-interval",
    kind: timeout,
    field: "refreshIntervalMs",
    default: "1m",
    help:
      "how often secrets and configmaps not watched are fetched again (also whenever a manifest changes)",
  }),
  resyncInterval: setting({
    flag: "resync-interval",
    kind: timeout,
    field: "resyncIntervalMs",
    default: "10m",
    help: "how often the daemon lists this node's pods again although its watch is open",
  }),
  startTimeout: setting({
    flag: "start-timeout",
    kind: timeout,
    field: "startTimeoutMs",
    default: "2m",
    help:
      "an active checkpoint with no running copy this long after its activation is a stalled start",
  }),
  promoteAfter: setting({
    flag: "promote-after",
    kind: duration({ positive: false, maxMs: DAY_MS }),
    field: "promoteAfterMs",
    default: "1m",
    help:
      "a parent's new spec replaces its checkpoint once the parent ran it Ready this long (0: at once)",
  }),
  crashLoopAfter: setting({
    flag: "crash-loop-after",
    kind: timeout,
    field: "crashLoopAfterMs",
    default: "30s",
    help:
      "a parent restarting on an unproven spec, never Ready, this long no longer counts as running",
  }),
  checkpointVersions: setting({
    flag: "checkpoint-versions",
    kind: count(1, 100),
    field: "checkpointVersions",
    default: 3,
    help: "promoted versions kept per checkpoint, with their files, for `rollback`",
  }),
  checkpointMaxSize: setting({
    flag: "checkpoint-max-size",
    kind: byteSize(2 ** 20),
    field: "checkpointMaxBytes",
    default: "64Mi",
    help: "the most one version of a checkpoint's stored files may take; more is refused, and said",
  }),
  namespace: setting({
    flag: "namespace",
    kind: namespaceList,
    field: "namespaces",
    // Whoever can create pods in a namespace listed here can have the node run one as a static
    // pod: docs/design.md#trust.
    default: ["kube-system"],
    help:
      "the namespaces parents may come from (YAML: a list), or `'*'`: all, trusting whoever creates pods",
  }),
  adminListen: setting({
    flag: "admin-listen",
    kind: listenAddress,
    field: "adminListen",
    default: "127.0.0.1:10280",
    help:
      "the admin endpoint (health, metrics, inspection): `host:port`, `[::1]:port`, `unix:/path` or `off`",
  }),
  adminAllowRemote: setting({
    flag: "admin-allow-remote",
    kind: boolean,
    field: "adminAllowRemote",
    default: false,
    help: "allow a non-loopback `adminListen`",
  }),
  adminTokenFile: setting({
    flag: "admin-token-file",
    kind: absolutePath,
    field: "adminTokenFile",
    default: "/etc/ckpt-agent/admin-token",
    help: "bearer token for `POST /v1/reconcile` and the verbs (0600 or stricter)",
  }),
  logLevel: setting({
    flag: "log-level",
    kind: oneOf(LEVELS),
    field: "logLevel",
    default: "info",
    help:
      "the least level logged; `debug` adds each pass, each admin request, and lasting problems again",
  }),
  logFormat: setting({
    flag: "log-format",
    kind: oneOf(LOG_FORMATS),
    field: "logFormat",
    default: "auto",
    help:
      "`text` (key=value) or `json` lines; `auto`: text on a terminal or in the journal, else JSON",
  }),
};

type Table = typeof SETTINGS;
export type SettingKey = keyof Table;
export const SETTING_KEYS = Object.keys(SETTINGS) as SettingKey[];

/** What a setting's check gives: undefined for an optional setting left unset. */
export type ValueOf<K extends SettingKey> = Table[K] extends Setting<infer V, string> ? V : never;

type FieldOf<K extends SettingKey> = Table[K]["field"];
type IsOptional<K extends SettingKey> = undefined extends ValueOf<K> ? true : false;

/** The configuration the settings make: each value in its field, optional ones left out. */
export type SettingsConfig =
  & { [K in SettingKey as IsOptional<K> extends true ? never : FieldOf<K>]: ValueOf<K> }
  & {
    [K in SettingKey as IsOptional<K> extends true ? FieldOf<K> : never]?: Exclude<
      ValueOf<K>,
      undefined
    >;
  };

/** The file read when --config is not given; a missing one is fine. */
export const DEFAULT_CONFIG_FILE = "/etc/ckpt-agent/config.yaml";

/** The --config flag, which is no setting: it says where the settings are. */
export const CONFIG_FILE_FLAG = {
  flag: "config",
  arg: "FILE",
  help: "the YAML file of settings; a missing default file is fine, a missing given one is not",
  default: DEFAULT_CONFIG_FILE,
};

/** A default value as a YAML file writes it (flow style for a list). */
export function yamlText(value: unknown): string {
  return Array.isArray(value) ? `[${value.join(", ")}]` : String(value);
}

/** A default as the help and the README say it: in words, or the value as YAML writes it. */
export function defaultText(setting: Setting<unknown, string>): string {
  return setting.defaultText ?? yamlText(setting.default);
}
