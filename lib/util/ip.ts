/** IP addresses as the agent compares them: loopback, canonical forms, and prefixes. */
import { isIP } from "node:net";

/** An IPv6 address in its canonical text form (lowercase, zeros compressed). */
export function canonicalIPv6(address: string): string {
  return new URL(`http://[${address}]/`).hostname.slice(1, -1);
}

/**
 * The bytes of an IP address: 4 for IPv4 and for an IPv4-mapped IPv6 address (as Go compares
 * them), 16 for any other IPv6 address; undefined for anything that is not an address. A zone
 * (`fe80::1%eth0`) is not an address here.
 */
export function ipBytes(text: string): Uint8Array | undefined {
  const family = isIP(text);
  if (family === 4) return Uint8Array.from(text.split(".").map(Number));
  if (family !== 6 || text.includes("%")) return undefined;
  const canonical = canonicalIPv6(text);
  const [head, tail] = canonical.includes("::") ? canonical.split("::") : [canonical, undefined];
  const groups = (part: string | undefined) => part ? part.split(":") : [];
  const missing = 8 - groups(head).length - groups(tail).length;
  const all = tail === undefined
    ? groups(head)
    : [...groups(head), ...Array(missing).fill("0"), ...groups(tail)];
  const bytes = new Uint8Array(16);
  all.forEach((group, i) => {
    const value = parseInt(group, 16);
    bytes[2 * i] = value >> 8;
    bytes[2 * i + 1] = value & 0xff;
  });
  const mapped = bytes.subarray(0, 10).every((b) => b === 0) && bytes[10] === 0xff &&
    bytes[11] === 0xff;
  return mapped ? bytes.slice(12) : bytes;
}

/** Whether `address` is in the prefix `network`/`bits` (both from ipBytes, of one family). */
export function inPrefix(address: Uint8Array, network: Uint8Array, bits: number): boolean {
  if (address.length !== network.length) return false;
  for (let bit = 0; bit < bits; bit += 8) {
    const mask = bits - bit >= 8 ? 0xff : (0xff << (8 - (bits - bit))) & 0xff;
    if ((address[bit / 8] & mask) !== (network[bit / 8] & mask)) return false;
  }
  return true;
}

/**
 * Whether `hostname` names this machine by a loopback address: 127.0.0.0/8, ::1 (also as an
 * IPv4-mapped 127 address) and `localhost`. Any other host name is not local: what it resolves
 * to is not ours to vouch for. IPv6 addresses may come bracketed, as URLs keep them.
 */
export function isLoopbackHost(hostname: string): boolean {
  const bare = hostname.replace(/^\[(.*)\]$/, "$1");
  if (bare.toLowerCase() === "localhost") return true;
  const bytes = ipBytes(bare);
  if (bytes === undefined) return false;
  return bytes.length === 4 ? bytes[0] === 127 : bytes.every((b, i) => b === (i === 15 ? 1 : 0));
}

const CIDR_V4 =
  /^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])\/([0-9]|[1-2][0-9]|3[0-2])$/;

/**
 * Whether `text` is an address with its prefix length, e.g. `10.244.0.5/24` or `fd00::5/64`: IPv4
 * in dotted decimal without leading zeros, IPv6 in any form a URL host takes, the prefix in
 * decimal within the family's bits.
 */
export function isCidr(text: string): boolean {
  if (CIDR_V4.test(text)) return true;
  const [address, prefix, ...rest] = text.split("/");
  if (rest.length > 0 || !prefix || `${Number(prefix)}` !== prefix) return false;
  if (Number(prefix) < 0 || Number(prefix) > 128) return false;
  return /^[0-9a-fA-F:.]+$/.test(address) && URL.canParse(`http://[${address}]`);
}
