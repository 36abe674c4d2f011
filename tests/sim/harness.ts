/** Shared set-up for tests that talk to the simulated peers: a cluster CA, a node's client
 *  certificate, and temporary directories that are always removed. */
import { createPrivateKey } from "node:crypto";
import http from "node:http";
import https from "node:https";
import { type CertAndKey, createSimCa, type SimCa } from "../../lib/sim/pki.ts";

export const NODE_NAME = "node-1";

export interface SimCluster {
  ca: SimCa;
  /** The node's identity, as in /var/lib/kubelet/pki/kubelet-client-current.pem. */
  nodeClient: CertAndKey;
}

export async function simCluster(): Promise<SimCluster> {
  const ca = await createSimCa();
  const nodeClient = await ca.issueClientCert({
    commonName: `system:node:${NODE_NAME}`,
    organizations: ["system:nodes"],
  });
  return { ca, nodeClient };
}

export async function withTempDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-sources-" });
  try {
    return await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Runs fn with a started resource and always closes it. */
export async function using<R extends { close(): Promise<void> }, T>(
  resource: R | Promise<R>,
  fn: (r: R) => Promise<T>,
): Promise<T> {
  const started = await resource;
  try {
    return await fn(started);
  } finally {
    await started.close();
  }
}

/** The same key as a SEC1 "EC PRIVATE KEY", the form kubelet-client-current.pem holds. */
export function sec1Key(pkcs8Pem: string): string {
  return createPrivateKey(pkcs8Pem).export({ type: "sec1", format: "pem" }) as string;
}

export interface RawAnswer {
  status: number;
  contentType: string;
  body: string;
}

/** One GET with nothing interpreted, to check what a simulated peer puts on the wire. */
export function rawGet(
  url: string,
  tls: { caPem?: string; certPem?: string; keyPem?: string } = {},
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const request = (url.startsWith("https:") ? https : http).get(url, {
      agent: false,
      ...(tls.caPem ? { ca: tls.caPem } : { rejectUnauthorized: false }),
      ...(tls.certPem ? { cert: tls.certPem, key: tls.keyPem } : {}),
    }, (response) => {
      let body = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => body += chunk);
      response.on("end", () =>
        resolve({
          status: response.statusCode ?? 0,
          contentType: String(response.headers["content-type"] ?? ""),
          body,
        }));
      response.on("error", reject);
    });
    request.on("error", reject);
  });
}
