/**
 * Where the agent's settings come from, in order: built-in defaults, the YAML file, the command
 * line, then the environment's self identity (pod deployments). Every setting is checked once,
 * by its kind, whatever its source, and a bad one stops the program with one line naming it as
 * the operator wrote it (`--poll-interval` or `config.yaml: pollInterval`). The settings
 * themselves are in lib/config/settings.ts.
 */
import { resolve } from "node:path";
import { isMap, isNode, isScalar, LineCounter, parseDocument, YAMLError } from "yaml";
import { osErrorText } from "../util/os_error.ts";
import { isValidNamespace, isValidObjectName } from "../core/ids.ts";
import type { SelfIdentity } from "../core/self.ts";
import { ConfigError } from "./errors.ts";
import { type FlagOptions, parseFlags } from "./flags.ts";
import { isLoopbackHost } from "../util/ip.ts";
import { describe, parseListenAddress, Problem } from "./kinds.ts";
import {
  CONFIG_FILE_FLAG,
  DEFAULT_CONFIG_FILE,
  SETTING_KEYS,
  type SettingKey,
  SETTINGS,
  type ValueOf,
} from "./settings.ts";
import type { Config } from "./types.ts";

/**
 * The defaults as they would be written in the YAML file. Not listed: the settings whose default
 * is derived (nodeName) or unset (kubeletReadonlyUrl, kubeletCaFile).
 */
export const DEFAULTS: Record<string, unknown> = Object.fromEntries(
  SETTING_KEYS.flatMap((key) => {
    const value = SETTINGS[key].default;
    return value === undefined ? [] : [[key, value]];
  }),
);

/** The values of checked settings, by YAML key. */
type Settings = { [K in SettingKey]: ValueOf<K> };

export const CONFIG_FLAGS: FlagOptions = {
  [CONFIG_FILE_FLAG.flag]: { type: "string" },
  ...Object.fromEntries(SETTING_KEYS.map((key) => {
    const { flag, kind } = SETTINGS[key];
    return [
      flag,
      kind.arg === undefined
        ? { type: "boolean" }
        : { type: "string", ...(kind.repeatable ? { multiple: true } : {}) },
    ];
  })),
};

/** A typo in the file gets a hint: the key it most likely meant. */
function suggestion(unknownKey: string): string {
  const folded = unknownKey.toLowerCase().replace(/[-_]/g, "");
  const near = SETTING_KEYS.find((key) =>
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

/**
 * Checks one source's settings; `name` says how the operator wrote a key in that source. An
 * unknown key is reported before any bad value; bad values in the table's order.
 */
function checkSettings(
  raw: Record<string, unknown>,
  name: (key: string) => string,
): Partial<Settings> {
  const unknownKey = Object.keys(raw).find((key) => !Object.hasOwn(SETTINGS, key));
  if (unknownKey !== undefined) {
    throw new ConfigError(`${name(unknownKey)}: unknown key${suggestion(unknownKey)}`);
  }
  const checked: Record<string, unknown> = {};
  for (const key of SETTING_KEYS) {
    if (!Object.hasOwn(raw, key)) continue;
    const value = SETTINGS[key].kind.check(raw[key]);
    if (value instanceof Problem) throw new ConfigError(`${name(key)}: ${value.message}`);
    // An optional setting turned off stays as undefined: it overrides what a source before set.
    checked[key] = value;
  }
  return checked as Partial<Settings>;
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
    throw new ConfigError(`--config: cannot read ${path}: ${osErrorText(e)}`);
  }
  const lines = new LineCounter();
  // A place in the file as editors and compilers name one: `config.yaml:3:15`.
  const at = (offset: number) => {
    const { line, col } = lines.linePos(offset);
    return `${path}:${line}:${col}`;
  };
  const document = parseDocument(source, { prettyErrors: false, lineCounter: lines });
  let doc: unknown;
  try {
    if (document.errors.length > 0) throw document.errors[0];
    doc = document.toJS();
  } catch (e) {
    const where = e instanceof YAMLError ? at(e.pos[0]) : path;
    throw new ConfigError(`${where}: not valid YAML: ${(e as Error).message.split("\n")[0]}`);
  }
  // An empty file (or one with only comments) is a valid file with no settings.
  if (doc === null || doc === undefined) return { file: path, settings: {} };
  if (typeof doc !== "object" || Array.isArray(doc)) {
    throw new ConfigError(`${path}: must be a mapping of settings, not ${describe(doc)}`);
  }
  // Each setting's problem names the place of its value.
  const places = new Map<string, string>();
  for (const { key, value } of isMap(document.contents) ? document.contents.items : []) {
    const node = isNode(value) ? value : key;
    if (isScalar(key) && isNode(node)) places.set(String(key.value), at(node.range![0]));
  }
  return {
    file: path,
    settings: checkSettings(
      doc as Record<string, unknown>,
      (key) => `${places.get(key) ?? path}: ${key}`,
    ),
  };
}

function flagName(key: string): string {
  return `--${SETTINGS[key as SettingKey].flag}`;
}

function flagSettings(values: Record<string, unknown>): Partial<Settings> {
  const raw: Record<string, unknown> = {};
  for (const key of SETTING_KEYS) {
    const value = values[SETTINGS[key].flag];
    if (value !== undefined) raw[key] = value;
  }
  return checkSettings(raw, flagName);
}

function checkDefaults(): Partial<Settings> {
  return checkSettings(DEFAULTS, (key) => `default ${key}`);
}

/** How a setting is named in a problem: as its flag when one set it, else as its key. */
type Namer = (key: SettingKey) => string;

function checkOwnDirs(settings: Settings, short: Namer, named: Namer) {
  const seen = new Map<string, SettingKey>();
  for (const key of SETTING_KEYS.filter((key) => SETTINGS[key].ownDir)) {
    const dir = resolve(settings[key] as string);
    const other = seen.get(dir);
    if (other) throw new ConfigError(`${named(key)}: ${dir} is also ${short(other)}`);
    seen.set(dir, key);
  }
}

/**
 * The admin endpoint shows what runs on the node, and is served without TLS: an address others
 * can reach is refused unless adminAllowRemote says it is meant.
 */
function checkAdminListen(settings: Settings, named: Namer) {
  const address = parseListenAddress(settings.adminListen);
  if (address.kind !== "tcp" || settings.adminAllowRemote || isLoopbackHost(address.hostname)) {
    return;
  }
  throw new ConfigError(
    `${named("adminListen")}: ${
      JSON.stringify(settings.adminListen)
    } is not a loopback address; binding it needs adminAllowRemote (--admin-allow-remote)`,
  );
}

/**
 * What no setting's kind can check alone: the settings together, once every source is merged.
 * Every command that takes the configuration gets these checks with the rest, so `config` and
 * `doctor` refuse whatever `run` would. `flagged` says which keys a flag set, `file` which file
 * was read.
 */
function checkTogether(settings: Settings, flagged: Set<SettingKey>, file?: string) {
  const short: Namer = (key) => flagged.has(key) ? flagName(key) : key;
  const named: Namer = (key) => flagged.has(key) || !file ? short(key) : `${file}: ${key}`;
  checkOwnDirs(settings, short, named);
  checkAdminListen(settings, named);
}

type Env = Record<string, string | undefined>;

function envValue(env: Env, name: string): string | undefined {
  return env[name] === "" ? undefined : env[name];
}

function defaultNodeName(env: Env, hostname: () => string): string {
  const check = SETTINGS.nodeName.kind.check;
  const fromEnv = envValue(env, "NODE_NAME");
  if (fromEnv !== undefined) {
    const checked = check(fromEnv);
    if (checked instanceof Problem) throw new ConfigError(`NODE_NAME: ${checked.message}`);
    return checked;
  }
  // The kubelet names its node after the lowercased host name; so do we.
  const checked = check(hostname().trim().toLowerCase());
  if (checked instanceof Problem) {
    throw new ConfigError(`${flagName("nodeName")}: not set, and the host name ${checked.message}`);
  }
  return checked;
}

/** Deployed as a pod, the agent knows its own pod from the downward API's variables. */
function selfIdentity(env: Env, nodeName: string): SelfIdentity | undefined {
  const podName = envValue(env, "POD_NAME"), podNamespace = envValue(env, "POD_NAMESPACE");
  if (podName === undefined || podNamespace === undefined) return undefined;
  if (!isValidObjectName(podName)) {
    throw new ConfigError(`POD_NAME: ${describe(podName)} is not a valid pod name`);
  }
  if (!isValidNamespace(podNamespace)) {
    throw new ConfigError(`POD_NAMESPACE: ${describe(podNamespace)} is not a valid namespace name`);
  }
  return { nodeName: envValue(env, "NODE_NAME") ?? nodeName, podName, podNamespace };
}

function toConfig(settings: Settings, self: SelfIdentity | undefined): Config {
  const config: Record<string, unknown> = {};
  for (const key of SETTING_KEYS) {
    if (settings[key] !== undefined) config[SETTINGS[key].field] = settings[key];
  }
  if (self) config.self = self;
  return config as unknown as Config;
}

/**
 * A configuration as the YAML file would say it (durations as Go strings, unset keys left out):
 * loading it back gives the same configuration, self identity aside (it comes from the env).
 */
export function configAsYamlSettings(config: Config): Record<string, unknown> {
  const fields = config as unknown as Record<string, unknown>;
  return Object.fromEntries(SETTING_KEYS.flatMap((key) => {
    const { field, kind } = SETTINGS[key];
    const value = fields[field];
    if (value === undefined) return [];
    return [[key, kind.yaml ? (kind.yaml as (value: unknown) => unknown)(value) : value]];
  }));
}

/**
 * The configuration the built-in defaults give on node `nodeName`, with no file, flags or
 * environment: where a program builds a configuration itself (the simulated node), a new
 * setting then needs nothing but its descriptor.
 */
export function defaultConfig(nodeName: string): Config {
  return toConfig({ ...checkDefaults(), nodeName } as Settings, undefined);
}

export interface LoadOptions {
  /** The environment for NODE_NAME, POD_NAME, POD_NAMESPACE; default: the process's. */
  env?: Env;
  /** Default: Deno.hostname. */
  hostname?: () => string;
  /** A command's own flags, parsed along with the configuration flags. */
  extraFlags?: FlagOptions;
  /** The command takes positional arguments (LoadedConfig.positionals). */
  positionals?: boolean;
  /** Read when --config is not given; a missing one is fine. Default: DEFAULT_CONFIG_FILE. */
  defaultConfigFile?: string;
}

export interface LoadedConfig {
  config: Config;
  /** Values of the command's extraFlags, by flag name. */
  extra: Record<string, unknown>;
  /** The arguments that are no flags, when the command takes them. */
  positionals: string[];
  /** The YAML file that was read, if any. */
  file?: string;
}

export async function loadConfig(args: string[], opts: LoadOptions = {}): Promise<LoadedConfig> {
  const extraFlags = opts.extraFlags ?? {};
  const { values, positionals } = parseFlags(
    args,
    { ...extraFlags, ...CONFIG_FLAGS },
    opts.positionals,
  );
  const configFlag = values[CONFIG_FILE_FLAG.flag] as string | undefined;
  if (configFlag === "") throw new ConfigError("--config: must be a file path");
  const { file, settings: fromFile } = await readConfigFile(
    configFlag ?? opts.defaultConfigFile ?? DEFAULT_CONFIG_FILE,
    configFlag !== undefined,
  );
  const fromFlags = flagSettings(values);
  const env = opts.env ?? Deno.env.toObject();
  const merged = { ...checkDefaults(), ...fromFile, ...fromFlags };
  const settings = {
    ...merged,
    nodeName: merged.nodeName ?? defaultNodeName(env, opts.hostname ?? Deno.hostname),
  } as Settings;
  checkTogether(settings, new Set(Object.keys(fromFlags) as SettingKey[]), file);
  const extra = Object.fromEntries(Object.keys(extraFlags).map((flag) => [flag, values[flag]]));
  return {
    config: toConfig(settings, selfIdentity(env, settings.nodeName)),
    extra,
    positionals,
    ...(file ? { file } : {}),
  };
}
