/**
 * Where the agent's settings come from, in order: built-in defaults, the YAML file, the command
 * line, then the environment's self identity (pod deployments). Every setting is checked once,
 * whatever its source, and a bad one stops the program with one line naming it as the operator
 * wrote it (`--poll-interval` or `config.yaml: pollInterval`).
 */
import { isIP } from "node:net";
import { isAbsolute, resolve } from "node:path";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { type Options, parseFlags } from "../cli/args.ts";
import { UsageError } from "../cli/errors.ts";
import { isValidNamespace, isValidObjectName } from "../core/ids.ts";
import type { SelfIdentity } from "../core/self.ts";
import { formatDuration, parseDuration } from "./duration.ts";
import { type Config, KUBELET_CA_OFF } from "./types.ts";

export const DEFAULT_CONFIG_FILE = "/etc/ckpt-agent/config.yaml";

/**
 * The defaults as they would be written in the YAML file. Not listed: nodeName (the host name),
 * kubeletReadonlyUrl (off) and kubeletCaFile (unset: the kubelet's certificate is verified with
 * the kubeconfig's cluster CA, and one it does not verify is asked with the client certificate
 * only).
 */
export const DEFAULTS = {
  kubeconfig: "/etc/kubernetes/kubeconfig",
  lockFile: "/run/lock/ckpt-agent.lock",
  containerRuntimeEndpoint: "unix:///run/containerd/containerd.sock",
  runtimeRequestTimeout: "2m",
  checkpointGracePeriod: "1m",
  kubeletUrl: "https://127.0.0.1:10250",
  apiTimeout: "10s",
  kubeletTimeout: "5s",
  staticPodDir: "/etc/kubernetes/manifests",
  inactiveDir: "/etc/kubernetes/inactive-manifests",
  secretsDir: "/etc/kubernetes/checkpoint-secrets",
  configmapsDir: "/etc/kubernetes/checkpoint-configmaps",
  stateDir: "/var/lib/ckpt-agent",
  pollInterval: "5s",
  refreshInterval: "1m",
  namespace: [] as string[],
  adminListen: "127.0.0.1:10280",
  adminAllowRemote: false,
  adminTokenFile: "/etc/ckpt-agent/admin-token",
};

class Problem {
  constructor(readonly message: string) {}
}

type Check<T> = (value: unknown) => T | Problem;

function describe(value: unknown): string {
  if (value === null || value === undefined) return "nothing";
  if (Array.isArray(value)) return "a list";
  if (typeof value === "object") return "a mapping";
  return JSON.stringify(value);
}

function text(value: unknown, what: string): string | Problem {
  return typeof value === "string" && value !== ""
    ? value
    : new Problem(`must be ${what}, not ${describe(value)}`);
}

const absolutePath: Check<string> = (value) => {
  const path = text(value, "an absolute path");
  if (path instanceof Problem) return path;
  return isAbsolute(path) && !path.includes("\0")
    ? path
    : new Problem(`${describe(path)} is not an absolute path`);
};

const httpUrl: Check<string> = (value) => {
  const url = text(value, "an http(s) URL");
  if (url instanceof Problem) return url;
  const protocol = URL.canParse(url) ? new URL(url).protocol : "";
  return protocol === "http:" || protocol === "https:"
    ? url
    : new Problem(`${describe(url)} is not an http(s) URL`);
};

/**
 * Unset in YAML (`key:` or `key: null`), or `off` (which also lets a flag turn off what the file
 * set), means the feature is off. No URL or absolute path is spelt `off`.
 */
function optional<T>(check: Check<T>): Check<T | undefined> {
  return (value) => value === null || value === "off" ? undefined : check(value);
}

/**
 * Unset (or null in YAML): the kubeconfig's cluster CA; `off`: not verified; else a CA file.
 * Unlike the other optional settings, `off` is not the same as unset here.
 */
const kubeletCaFile: Check<string | undefined> = (value) =>
  value === null ? undefined : value === KUBELET_CA_OFF ? KUBELET_CA_OFF : absolutePath(value);

const runtimeEndpoint: Check<string> = (value) => {
  const endpoint = text(value, "a unix socket (unix:///path)");
  if (endpoint instanceof Problem) return endpoint;
  const path = endpoint.startsWith("unix://") ? endpoint.slice("unix://".length) : endpoint;
  return isAbsolute(path)
    ? endpoint
    : new Problem(`${describe(endpoint)} is not a unix socket (unix:///path or /path)`);
};

const DAY_MS = 24 * 3600 * 1000;

/** Durations in milliseconds; a bare number other than 0 has no unit anyone could agree on. */
function duration(bounds: { positive: boolean; maxMs?: number }): Check<number> {
  return (value) => {
    if (value === 0) return 0;
    if (typeof value === "number") {
      return new Problem(`${value} has no unit (seconds? milliseconds?); write e.g. "${value}s"`);
    }
    const source = text(value, 'a duration such as "90s" or "1m30s"');
    if (source instanceof Problem) return source;
    const ms = parseDuration(source);
    if (ms === undefined) {
      return /^[-+]?\d+(\.\d*)?$/.test(source)
        ? new Problem(`${describe(source)} has no unit; write e.g. "${source}s"`)
        : new Problem(`${describe(source)} is not a duration (e.g. "90s", "1m30s", "500ms")`);
    }
    if (ms < 0) return new Problem(`${describe(source)} is negative`);
    if (bounds.positive && ms === 0) return new Problem("must be longer than 0");
    if (bounds.maxMs !== undefined && ms > bounds.maxMs) {
      return new Problem(`${describe(source)} is longer than ${formatDuration(bounds.maxMs)}`);
    }
    return ms;
  };
}

const nodeName: Check<string> = (value) => {
  const name = text(value, "a node name");
  if (name instanceof Problem) return name;
  return isValidObjectName(name)
    ? name
    : new Problem(`${describe(name)} is not a valid node name (lowercase DNS subdomain)`);
};

const namespaceList: Check<string[]> = (value) => {
  if (!Array.isArray(value)) {
    return new Problem(`must be a list of namespace names, not ${describe(value)}`);
  }
  for (const [i, item] of value.entries()) {
    if (typeof item !== "string" || !isValidNamespace(item)) {
      return new Problem(`item ${i}: ${describe(item)} is not a valid namespace name`);
    }
  }
  return [...new Set(value as string[])];
};

const HOSTNAME =
  /^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*$/;
const LISTEN_FORMS = "host:port, [ipv6]:port, unix:/path or off";

function isListenHost(host: string, bracketed: boolean): boolean {
  if (bracketed) return isIP(host) === 6;
  // Digits and dots only is meant as an IPv4 address, and must be one.
  if (/^[\d.]+$/.test(host)) return isIP(host) === 4;
  return HOSTNAME.test(host);
}

/** Syntax only: whether a remote address is allowed is the admin server's decision. */
const listenAddress: Check<string> = (value) => {
  const address = text(value, LISTEN_FORMS);
  if (address instanceof Problem) return address;
  if (address === "off") return address;
  if (address.startsWith("unix:")) {
    return isAbsolute(address.slice("unix:".length))
      ? address
      : new Problem(`${describe(address)}: the socket path must be absolute`);
  }
  const m = /^(?:\[([^\]]*)\]|([^:[\]]*)):(\d{1,5})$/.exec(address);
  if (!m) return new Problem(`${describe(address)} is not one of ${LISTEN_FORMS}`);
  const host = m[1] ?? m[2];
  if (!isListenHost(host, m[1] !== undefined)) {
    return new Problem(`${describe(address)}: ${describe(host)} is not a host or IP address`);
  }
  return Number(m[3]) <= 65535
    ? address
    : new Problem(`${describe(address)}: port ${m[3]} is out of range`);
};

const boolean: Check<boolean> = (value) =>
  typeof value === "boolean" ? value : new Problem(`must be true or false, not ${describe(value)}`);

/** Every setting: YAML key → check. The order is the order `ckpt-agent config` prints. */
const CHECKS = {
  kubeconfig: absolutePath,
  lockFile: absolutePath,
  containerRuntimeEndpoint: runtimeEndpoint,
  runtimeRequestTimeout: duration({ positive: true, maxMs: DAY_MS }),
  checkpointGracePeriod: duration({ positive: false }),
  nodeName,
  kubeletUrl: httpUrl,
  kubeletReadonlyUrl: optional(httpUrl),
  kubeletCaFile,
  apiTimeout: duration({ positive: true, maxMs: DAY_MS }),
  kubeletTimeout: duration({ positive: true, maxMs: DAY_MS }),
  staticPodDir: absolutePath,
  inactiveDir: absolutePath,
  secretsDir: absolutePath,
  configmapsDir: absolutePath,
  stateDir: absolutePath,
  pollInterval: duration({ positive: true, maxMs: DAY_MS }),
  refreshInterval: duration({ positive: true, maxMs: DAY_MS }),
  namespace: namespaceList,
  adminListen: listenAddress,
  adminAllowRemote: boolean,
  adminTokenFile: absolutePath,
};

type Key = keyof typeof CHECKS;
type Settings = { [K in Key]: Exclude<ReturnType<(typeof CHECKS)[K]>, Problem> };

/** Flag names; the first five are the original checkpointer's, so unit files carry over. */
const FLAG_OF: Record<Key, string> = {
  kubeconfig: "kubeconfig",
  lockFile: "lock-file",
  containerRuntimeEndpoint: "container-runtime-endpoint",
  runtimeRequestTimeout: "runtime-request-timeout",
  checkpointGracePeriod: "checkpoint-grace-period",
  nodeName: "node-name",
  kubeletUrl: "kubelet-url",
  kubeletReadonlyUrl: "kubelet-readonly-url",
  kubeletCaFile: "kubelet-ca-file",
  apiTimeout: "api-timeout",
  kubeletTimeout: "kubelet-timeout",
  staticPodDir: "static-pod-dir",
  inactiveDir: "inactive-dir",
  secretsDir: "secrets-dir",
  configmapsDir: "configmaps-dir",
  stateDir: "state-dir",
  pollInterval: "poll-interval",
  refreshInterval: "refresh-interval",
  namespace: "namespace",
  adminListen: "admin-listen",
  adminAllowRemote: "admin-allow-remote",
  adminTokenFile: "admin-token-file",
};

const KEYS = Object.keys(CHECKS) as Key[];

export const CONFIG_FLAGS: Options = {
  config: { type: "string" },
  ...Object.fromEntries(KEYS.map((key) => [
    FLAG_OF[key],
    key === "adminAllowRemote"
      ? { type: "boolean" }
      : key === "namespace"
      ? { type: "string", multiple: true }
      : { type: "string" },
  ])),
};

const SettingsSchema = z.strictObject(
  Object.fromEntries(KEYS.map((key) => [
    key,
    z.unknown().transform((value, ctx) => {
      const checked = CHECKS[key](value);
      if (!(checked instanceof Problem)) return checked;
      ctx.addIssue({ code: "custom", message: checked.message });
      return z.NEVER;
    }).optional(),
  ])),
);

/** A typo in the file gets a hint: the key it most likely meant. */
function suggestion(unknownKey: string): string {
  const folded = unknownKey.toLowerCase().replace(/[-_]/g, "");
  const near = KEYS.find((key) =>
    key.toLowerCase() === folded || editDistance(key.toLowerCase(), folded) <= 2
  );
  return near ? ` (did you mean ${near}?)` : "";
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1);
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, substitution);
    }
    previous = current;
  }
  return previous[b.length];
}

/** Checks one source's settings; `name` says how the operator wrote a key in that source. */
function checkSettings(raw: unknown, name: (key: string) => string): Partial<Settings> {
  const result = SettingsSchema.safeParse(raw);
  if (result.success) return result.data as Partial<Settings>;
  const issues = result.error.issues;
  const unknown = issues.find((issue) => issue.code === "unrecognized_keys");
  if (unknown) {
    const key = unknown.keys[0];
    throw new UsageError(`${name(key)}: unknown key${suggestion(key)}`);
  }
  throw new UsageError(`${name(String(issues[0].path[0]))}: ${issues[0].message}`);
}

interface FileSettings {
  file?: string;
  settings: Partial<Settings>;
}

async function readConfigFile(path: string, explicit: boolean): Promise<FileSettings> {
  let source: string;
  try {
    source = await Deno.readTextFile(path);
  } catch (e) {
    if (!explicit && e instanceof Deno.errors.NotFound) return { settings: {} };
    throw new UsageError(`--config: cannot read ${path}: ${(e as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = parseYaml(source, { prettyErrors: false });
  } catch (e) {
    throw new UsageError(`${path}: not valid YAML: ${(e as Error).message.split("\n")[0]}`);
  }
  // An empty file (or one with only comments) is a valid file with no settings.
  if (doc === null || doc === undefined) return { file: path, settings: {} };
  if (typeof doc !== "object" || Array.isArray(doc)) {
    throw new UsageError(`${path}: must be a mapping of settings, not ${describe(doc)}`);
  }
  return { file: path, settings: checkSettings(doc, (key) => `${path}: ${key}`) };
}

function flagSettings(values: Record<string, unknown>): Partial<Settings> {
  const raw: Record<string, unknown> = {};
  for (const key of KEYS) {
    if (values[FLAG_OF[key]] !== undefined) raw[key] = values[FLAG_OF[key]];
  }
  return checkSettings(raw, (key) => `--${FLAG_OF[key as Key]}`);
}

function checkDefaults(): Omit<Settings, "nodeName"> {
  const settings = checkSettings(DEFAULTS, (key) => `default ${key}`);
  return settings as Omit<Settings, "nodeName">;
}

/** Directories the agent writes into; sharing one would mix checkpoints with foreign files. */
const DISTINCT_DIRS = [
  "staticPodDir",
  "inactiveDir",
  "secretsDir",
  "configmapsDir",
  "stateDir",
] as const;

/** `flagged` says which keys were set by a flag, `file` which by the file. */
function checkDistinctDirs(settings: Settings, flagged: Set<Key>, file?: string) {
  const short = (key: Key) => flagged.has(key) ? `--${FLAG_OF[key]}` : key;
  const seen = new Map<string, Key>();
  for (const key of DISTINCT_DIRS) {
    const dir = resolve(settings[key]);
    const other = seen.get(dir);
    if (other) {
      const name = flagged.has(key) || !file ? short(key) : `${file}: ${key}`;
      throw new UsageError(`${name}: ${dir} is also ${short(other)}`);
    }
    seen.set(dir, key);
  }
}

type Env = Record<string, string | undefined>;

function envValue(env: Env, name: string): string | undefined {
  return env[name] === "" ? undefined : env[name];
}

function defaultNodeName(env: Env, hostname: () => string): string {
  const fromEnv = envValue(env, "NODE_NAME");
  if (fromEnv !== undefined) {
    const checked = nodeName(fromEnv);
    if (checked instanceof Problem) throw new UsageError(`NODE_NAME: ${checked.message}`);
    return checked;
  }
  // The kubelet names its node after the lowercased host name; so do we.
  const host = hostname().trim().toLowerCase();
  const checked = nodeName(host);
  if (checked instanceof Problem) {
    throw new UsageError(`--node-name: not set, and the host name ${checked.message}`);
  }
  return checked;
}

/** Deployed as a pod, the agent knows its own pod from the downward API's variables. */
function selfIdentity(env: Env, nodeName: string): SelfIdentity | undefined {
  const podName = envValue(env, "POD_NAME"), podNamespace = envValue(env, "POD_NAMESPACE");
  if (podName === undefined || podNamespace === undefined) return undefined;
  if (!isValidObjectName(podName)) {
    throw new UsageError(`POD_NAME: ${describe(podName)} is not a valid pod name`);
  }
  if (!isValidNamespace(podNamespace)) {
    throw new UsageError(`POD_NAMESPACE: ${describe(podNamespace)} is not a valid namespace name`);
  }
  return { nodeName: envValue(env, "NODE_NAME") ?? nodeName, podName, podNamespace };
}

function toConfig(s: Settings, self: SelfIdentity | undefined): Config {
  return {
    kubeconfig: s.kubeconfig,
    lockFile: s.lockFile,
    containerRuntimeEndpoint: s.containerRuntimeEndpoint,
    runtimeRequestTimeoutMs: s.runtimeRequestTimeout,
    apiTimeoutMs: s.apiTimeout,
    kubeletTimeoutMs: s.kubeletTimeout,
    checkpointGracePeriodMs: s.checkpointGracePeriod,
    nodeName: s.nodeName,
    kubeletUrl: s.kubeletUrl,
    ...(s.kubeletReadonlyUrl !== undefined ? { kubeletReadonlyUrl: s.kubeletReadonlyUrl } : {}),
    ...(s.kubeletCaFile !== undefined ? { kubeletCaFile: s.kubeletCaFile } : {}),
    staticPodDir: s.staticPodDir,
    inactiveDir: s.inactiveDir,
    secretsDir: s.secretsDir,
    configmapsDir: s.configmapsDir,
    stateDir: s.stateDir,
    pollIntervalMs: s.pollInterval,
    refreshIntervalMs: s.refreshInterval,
    namespaces: s.namespace,
    adminListen: s.adminListen,
    adminAllowRemote: s.adminAllowRemote,
    adminTokenFile: s.adminTokenFile,
    ...(self ? { self } : {}),
  };
}

/**
 * A configuration as the YAML file would say it (durations as Go strings, unset keys left out):
 * loading it back gives the same configuration, self identity aside (it comes from the env).
 */
export function configAsYamlSettings(config: Config): Record<string, unknown> {
  const settings: Record<Key, unknown> = {
    kubeconfig: config.kubeconfig,
    lockFile: config.lockFile,
    containerRuntimeEndpoint: config.containerRuntimeEndpoint,
    runtimeRequestTimeout: formatDuration(config.runtimeRequestTimeoutMs),
    checkpointGracePeriod: formatDuration(config.checkpointGracePeriodMs),
    nodeName: config.nodeName,
    kubeletUrl: config.kubeletUrl,
    kubeletReadonlyUrl: config.kubeletReadonlyUrl,
    kubeletCaFile: config.kubeletCaFile,
    apiTimeout: formatDuration(config.apiTimeoutMs),
    kubeletTimeout: formatDuration(config.kubeletTimeoutMs),
    staticPodDir: config.staticPodDir,
    inactiveDir: config.inactiveDir,
    secretsDir: config.secretsDir,
    configmapsDir: config.configmapsDir,
    stateDir: config.stateDir,
    pollInterval: formatDuration(config.pollIntervalMs),
    refreshInterval: formatDuration(config.refreshIntervalMs),
    namespace: config.namespaces,
    adminListen: config.adminListen,
    adminAllowRemote: config.adminAllowRemote,
    adminTokenFile: config.adminTokenFile,
  };
  return Object.fromEntries(
    KEYS.flatMap((k) => settings[k] === undefined ? [] : [[k, settings[k]]]),
  );
}

export interface LoadOptions {
  /** The environment for NODE_NAME, POD_NAME, POD_NAMESPACE; default: the process's. */
  env?: Env;
  /** Default: Deno.hostname. */
  hostname?: () => string;
  /** A command's own flags, parsed along with the configuration flags. */
  extraFlags?: Options;
  /** Read when --config is not given; a missing one is fine. Default: DEFAULT_CONFIG_FILE. */
  defaultConfigFile?: string;
}

export interface LoadedConfig {
  config: Config;
  /** Values of the command's extraFlags, by flag name. */
  extra: Record<string, unknown>;
  /** The YAML file that was read, if any. */
  file?: string;
}

export async function loadConfig(args: string[], opts: LoadOptions = {}): Promise<LoadedConfig> {
  const extraFlags = opts.extraFlags ?? {};
  const { values } = parseFlags(args, { ...extraFlags, ...CONFIG_FLAGS });
  const configFlag = values.config as string | undefined;
  if (configFlag === "") throw new UsageError("--config: must be a file path");
  const { file, settings: fromFile } = await readConfigFile(
    configFlag ?? opts.defaultConfigFile ?? DEFAULT_CONFIG_FILE,
    configFlag !== undefined,
  );
  const fromFlags = flagSettings(values);
  const env = opts.env ?? Deno.env.toObject();
  const merged = { ...checkDefaults(), ...fromFile, ...fromFlags };
  const settings: Settings = {
    ...merged,
    nodeName: merged.nodeName ?? defaultNodeName(env, opts.hostname ?? Deno.hostname),
  };
  checkDistinctDirs(settings, new Set(Object.keys(fromFlags) as Key[]), file);
  const extra = Object.fromEntries(Object.keys(extraFlags).map((flag) => [flag, values[flag]]));
  return {
    config: toConfig(settings, selfIdentity(env, settings.nodeName)),
    extra,
    ...(file ? { file } : {}),
  };
}
