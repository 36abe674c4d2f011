/**
 * The kinds of value a setting can hold. A kind checks a value from any source (YAML, a flag,
 * a default) and says what is wrong in words an operator can act on; it also says how the value
 * is written back in YAML and what the flag's argument is called in the help.
 */
import { isIP } from "node:net";
import { isAbsolute } from "node:path";
import { parseQuantity } from "../core/downward_api.ts";
import { isValidObjectName } from "../core/ids.ts";
import { namespacesProblem } from "../core/pod.ts";
import { formatDuration, parseDuration } from "./duration.ts";

/** What is wrong with a value, without the setting's name (the loader adds it). */
export class Problem {
  constructor(readonly message: string) {}
}

export type Check<T> = (value: unknown) => T | Problem;

export interface Kind<V> {
  check: Check<V>;
  /** The value as the YAML file writes it; default: as it is. */
  yaml?(value: Exclude<V, undefined>): unknown;
  /** The flag's argument as the help names it; a kind without one is a switch (`--flag`). */
  arg?: string;
  /** A list: the flag is given once per item, the YAML value is a list. */
  repeatable?: true;
}

export function describe(value: unknown): string {
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

function checkAbsolutePath(value: unknown): string | Problem {
  const path = text(value, "an absolute path");
  if (path instanceof Problem) return path;
  return isAbsolute(path) && !path.includes("\0")
    ? path
    : new Problem(`${describe(path)} is not an absolute path`);
}

export const absolutePath: Kind<string> = { check: checkAbsolutePath, arg: "PATH" };

export const httpUrl: Kind<string> = {
  arg: "URL",
  check(value) {
    const url = text(value, "an http(s) URL");
    if (url instanceof Problem) return url;
    const protocol = URL.canParse(url) ? new URL(url).protocol : "";
    return protocol === "http:" || protocol === "https:"
      ? url
      : new Problem(`${describe(url)} is not an http(s) URL`);
  },
};

/**
 * Unset in YAML (`key:` or `key: null`), or `off` (which also lets a flag turn off what the file
 * set), means the feature is off. No URL or absolute path is spelt `off`.
 */
export function optional<T>(kind: Kind<T>): Kind<T | undefined> {
  return {
    ...kind,
    check: (value) => value === null || value === "off" ? undefined : kind.check(value),
  };
}

/** `kubeletCaFile: off`: the kubelet's serving certificate is not verified. */
export const KUBELET_CA_OFF = "off";

/**
 * Unset (or null in YAML): the kubeconfig's cluster CA; `off`: not verified; else a CA file.
 * Unlike the optional settings, `off` is not the same as unset here.
 */
export const kubeletCaFile: Kind<string | undefined> = {
  arg: "PATH",
  check: (value) =>
    value === null
      ? undefined
      : value === KUBELET_CA_OFF
      ? KUBELET_CA_OFF
      : checkAbsolutePath(value),
};

export const runtimeEndpoint: Kind<string> = {
  arg: "ENDPOINT",
  check(value) {
    const endpoint = text(value, "a unix socket (unix:///path)");
    if (endpoint instanceof Problem) return endpoint;
    const path = endpoint.startsWith("unix://") ? endpoint.slice("unix://".length) : endpoint;
    return isAbsolute(path)
      ? endpoint
      : new Problem(`${describe(endpoint)} is not a unix socket (unix:///path or /path)`);
  },
};

export const DAY_MS = 24 * 3600 * 1000;

/**
 * Go durations in YAML and flags, milliseconds in the configuration; a bare number other than 0
 * has no unit anyone could agree on.
 */
export function duration(bounds: { positive: boolean; maxMs?: number }): Kind<number> {
  return {
    arg: "DURATION",
    yaml: formatDuration,
    check(value) {
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
    },
  };
}

export const nodeName: Kind<string> = {
  arg: "NAME",
  check(value) {
    const name = text(value, "a node name");
    if (name instanceof Problem) return name;
    return isValidObjectName(name)
      ? name
      : new Problem(`${describe(name)} is not a valid node name (lowercase DNS subdomain)`);
  },
};

export const namespaceList: Kind<string[]> = {
  arg: "NAMESPACE",
  repeatable: true,
  check(value) {
    if (!Array.isArray(value)) {
      return new Problem(`must be a list of namespace names, not ${describe(value)}`);
    }
    const problem = namespacesProblem(value);
    return problem === undefined ? [...new Set(value as string[])] : new Problem(problem);
  },
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

export type ListenAddress =
  | { kind: "off" }
  | { kind: "tcp"; hostname: string; port: number }
  | { kind: "unix"; path: string };

/** `host:port` or `[ipv6]:port`: the host (bracketed or bare) and the port. */
const TCP_ADDRESS = /^(?:\[([^\]]*)\]|([^:[\]]*)):(\d{1,5})$/;

/** The parts of an address listenAddress accepted; throws on anything else. */
export function parseListenAddress(text: string): ListenAddress {
  if (text === "off") return { kind: "off" };
  if (text.startsWith("unix:")) return { kind: "unix", path: text.slice("unix:".length) };
  const m = TCP_ADDRESS.exec(text);
  if (!m) throw new Error(`not a listen address: ${JSON.stringify(text)}`);
  return { kind: "tcp", hostname: m[1] ?? m[2], port: Number(m[3]) };
}

/**
 * Syntax only: whether a remote address is allowed depends on another setting, and the loader
 * decides it (lib/config/load.ts).
 */
export const listenAddress: Kind<string> = {
  arg: "ADDRESS",
  check(value) {
    const address = text(value, LISTEN_FORMS);
    if (address instanceof Problem) return address;
    if (address === "off") return address;
    if (address.startsWith("unix:")) {
      return isAbsolute(address.slice("unix:".length))
        ? address
        : new Problem(`${describe(address)}: the socket path must be absolute`);
    }
    const m = TCP_ADDRESS.exec(address);
    if (!m) return new Problem(`${describe(address)} is not one of ${LISTEN_FORMS}`);
    const host = m[1] ?? m[2];
    if (!isListenHost(host, m[1] !== undefined)) {
      return new Problem(`${describe(address)}: ${describe(host)} is not a host or IP address`);
    }
    return Number(m[3]) <= 65535
      ? address
      : new Problem(`${describe(address)}: port ${m[3]} is out of range`);
  },
};

export const boolean: Kind<boolean> = {
  check: (value) =>
    typeof value === "boolean"
      ? value
      : new Problem(`must be true or false, not ${describe(value)}`),
};

/** One of a few words, as written. */
export function oneOf<const W extends string>(words: readonly W[]): Kind<W> {
  return {
    arg: words.join("|"),
    check: (value) =>
      words.includes(value as W)
        ? value as W
        : new Problem(`must be one of ${words.join(", ")}, not ${describe(value)}`),
  };
}

const BINARY_UNITS = [["Gi", 2 ** 30], ["Mi", 2 ** 20], ["Ki", 2 ** 10]] as const;

/** Bytes as the largest binary unit that divides them whole (`64Mi`), else a plain number. */
export function formatByteSize(bytes: number): string | number {
  const unit = BINARY_UNITS.find(([, size]) => bytes >= size && bytes % size === 0);
  return unit ? `${bytes / unit[1]}${unit[0]}` : bytes;
}

/**
 * A size in bytes, at least `minBytes`: a whole number, or a Kubernetes quantity such as `64Mi`
 * or `1Gi` (as a pod's resources are written).
 */
export function byteSize(minBytes: number): Kind<number> {
  return {
    arg: "SIZE",
    yaml: formatByteSize,
    check(value) {
      const bytes = typeof value === "number"
        ? value
        : typeof value === "string"
        ? parseQuantity(value)
        : undefined;
      if (bytes === undefined || !Number.isSafeInteger(bytes)) {
        return new Problem(`${describe(value)} is not a size in bytes (e.g. "64Mi", "1Gi")`);
      }
      if (bytes < minBytes) {
        return new Problem(`${describe(value)} is less than ${formatByteSize(minBytes)}`);
      }
      return bytes;
    },
  };
}

/** A whole number in [min, max]; a flag's text is read as one. */
export function count(min: number, max: number): Kind<number> {
  return {
    arg: "N",
    check(value) {
      const n = typeof value === "string" && /^\d+$/.test(value) ? Number(value) : value;
      if (typeof n !== "number" || !Number.isSafeInteger(n)) {
        return new Problem(`must be a whole number, not ${describe(value)}`);
      }
      if (n < min || n > max) return new Problem(`${n} is not between ${min} and ${max}`);
      return n;
    },
  };
}
