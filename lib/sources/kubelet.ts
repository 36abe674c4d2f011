/**
 * The kubelet's `/pods`: the pods it was told to run, which is how the agent discovers parents
 * while the API server is gone. The secure port first, with the kubeconfig's client certificate;
 * then, if configured, the read-only port (plain HTTP, no credentials).
 */
import type { Pod } from "../core/pod.ts";
import { PodListSchema } from "./apiserver.ts";
import { getJson, type HttpTarget } from "./http.ts";
import { type Credentials, readBearerToken } from "./kubeconfig.ts";
import { failed, type SourceResult } from "./types.ts";

export interface KubeletClient {
  listPods(): Promise<SourceResult<Pod[]>>;
}

export interface KubeletClientOptions {
  /** The secure port, e.g. `https://127.0.0.1:10250`. */
  url: string;
  /** The read-only port, e.g. `http://127.0.0.1:10255`; unset: not asked. */
  readonlyUrl?: string;
  /** CA of the kubelet's serving certificate; unset: the certificate is not verified (a
   *  kubelet's own certificate is self-signed). */
  caPem?: string;
  creds: Credentials;
  timeoutMs: number;
}

export function createKubeletClient(opts: KubeletClientOptions): KubeletClient {
  const verified = opts.caPem !== undefined;
  const secure: HttpTarget = {
    source: "kubelet",
    baseUrl: opts.url,
    timeoutMs: opts.timeoutMs,
    tls: {
      verifyServer: verified,
      ...(verified ? { caPem: opts.caPem } : {}),
      ...(opts.creds.certPem !== undefined
        ? { certPem: opts.creds.certPem, keyPem: opts.creds.keyPem }
        : {}),
    },
  };
  const readonly: HttpTarget | undefined = opts.readonlyUrl === undefined
    ? undefined
    : { source: "kubelet", baseUrl: opts.readonlyUrl, timeoutMs: opts.timeoutMs };

  async function listSecure(): Promise<SourceResult<Pod[]>> {
    // A bearer token is sent only to a kubelet whose certificate was verified: unlike a client
    // certificate, a token handed to whoever answers on the port can be replayed by them.
    let bearerToken: string | undefined;
    if (verified) {
      const token = await readBearerToken(opts.creds);
      if (!token.ok) {
        return failed("kubelet", "unauthorized", `GET ${opts.url}/pods: ${token.error}`);
      }
      bearerToken = token.token;
    }
    return getJson(secure, { path: "/pods", schema: PodListSchema, bearerToken });
  }

  return {
    async listPods() {
      const first = await listSecure();
      if (first.ok || readonly === undefined) return first;
      const second = await getJson(readonly, { path: "/pods", schema: PodListSchema });
      if (second.ok) return second;
      return failed(
        "kubelet",
        first.failure.kind,
        `${first.failure.message}; read-only port: ${second.failure.message}`,
        first.failure.status,
      );
    },
  };
}
