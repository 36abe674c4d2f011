/**
 * The kubelet's `/pods`: the pods it was told to run, which is how the agent discovers parents
 * while the API server is gone. The secure port first, with the kubeconfig's credentials; then,
 * if configured, the read-only port (plain HTTP, no credentials).
 *
 * Which credentials go to the secure port depends on whether its serving certificate verifies,
 * because a bearer token, unlike a client certificate, can be replayed by whoever receives it:
 * - `kubeletCaFile: <path>`: verified with that CA;
 * - unset: verified with the kubeconfig's cluster CA (the system's roots if it names none). A
 *   kubelet serving its own self-signed certificate (kubeadm's default) does not verify: with a
 *   client certificate and no token it is then asked unverified, with the certificate only
 *   (nothing replayable leaves the node), said once, and remembered for the client's lifetime;
 * - `kubeletCaFile: off`: not verified; the client certificate only.
 * A token is never sent to a kubelet that was not verified: the call fails as misconfigured and
 * says to set kubeletCaFile. An answer read unverified, or from the read-only port, is marked so
 * (KubeletPods.verified): it adds no parent.
 */
import type { Pod } from "../core/pod.ts";
import { AnswerMemo } from "./answer_memo.ts";
import { PodListSchema } from "./apiserver.ts";
import {
  CERTIFICATE_NOT_VERIFIED,
  ConnectionPool,
  getJson,
  type HttpTarget,
  type TlsSettings,
} from "./http.ts";
import { type Credentials, readBearerToken } from "./kubeconfig.ts";
import { chooseProxy, type ProxyEnvironment } from "./proxy.ts";
import { failed, type SourceResult, succeeded } from "./types.ts";

/** The kubelet's `/pods`, and whether its answer can be trusted to name parents. */
export interface KubeletPods {
  pods: Pod[];
  /**
   * Read over TLS with the kubelet's serving certificate verified. An answer read unverified
   * (kubeletCaFile off, a certificate the CA does not verify, the read-only port) may come
   * from anyone who got the port first, e.g. while the kubelet restarts: it confirms known
   * parents, and adds none (docs/design.md#trust).
   */
  verified: boolean;
}

export interface KubeletClient {
  listPods(): Promise<SourceResult<KubeletPods>>;
}

/** How the kubelet's serving certificate is verified (the `kubeletCaFile` setting). */
export type KubeletCa =
  | { kind: "file"; path: string; pem: string }
  | { kind: "cluster" }
  | { kind: "off" };

/** Where the CA of a kubelet's own self-signed certificate is, on a kubeadm node. */
export const SELF_SIGNED_KUBELET_CA = "/var/lib/kubelet/pki/kubelet.crt";

export interface KubeletClientOptions {
  /** The secure port, e.g. `https://127.0.0.1:10250`. */
  url: string;
  /** The read-only port, e.g. `http://127.0.0.1:10255`; unset: not asked. */
  readonlyUrl?: string;
  ca: KubeletCa;
  creds: Credentials;
  timeoutMs: number;
  /** Where the proxy variables are read, once, now (lib/sources/proxy.ts). */
  env?: ProxyEnvironment;
  /** Told once, when the kubelet is first asked unverified because its certificate did not
   *  verify against the cluster CA, and once when the read-only port first answers. */
  onUnverified?: (message: string, fields: Record<string, string>) => void;
}

function describeCa(ca: KubeletCa, creds: Credentials): string {
  if (ca.kind === "file") return `kubeletCaFile ${ca.path}`;
  if (ca.kind === "off") return "nothing (kubeletCaFile is off)";
  return creds.caPem !== undefined
    ? `the kubeconfig's cluster CA (${creds.caOrigin ?? "certificate-authority"})`
    : "the system's roots (the kubeconfig names no certificate-authority)";
}

/**
 * The kubelet is asked every pass, one call at a time: its connection is kept between passes
 * (lib/sources/http.ts, ConnectionPool), and closed after this long without a call. The kubelet
 * closes connections idle for 90 s (its http.Server's IdleTimeout); closing ours first means a
 * call never goes out on a connection the kubelet is closing at that moment.
 */
const KEEP_IDLE_MS = 60_000;

/** What an answer read unverified is good for (docs/design.md#trust), as the warnings say it. */
const ADDS_NO_PARENT = "its answers add no parent: they only confirm parents the API server " +
  "lists or a checkpoint already has";

const HOW_TO_VERIFY = `set kubeletCaFile to the CA that signed the kubelet's serving ` +
  `certificate (for a kubelet's own self-signed certificate: ${SELF_SIGNED_KUBELET_CA})`;

export function createKubeletClient(opts: KubeletClientOptions): KubeletClient {
  const { creds, ca } = opts;
  const env = opts.env ?? Deno.env.toObject();
  const hasToken = creds.token !== undefined || creds.tokenFile !== undefined;
  const clientCert: Pick<TlsSettings, "certPem" | "keyPem"> = creds.certPem !== undefined
    ? { certPem: creds.certPem, keyPem: creds.keyPem }
    : {};
  const caPem = ca.kind === "file" ? ca.pem : ca.kind === "cluster" ? creds.caPem : undefined;
  // Connections differ by their TLS settings too: one made unverified never serves a call that
  // must verify.
  const connections = new ConnectionPool(1, { keepIdleMs: KEEP_IDLE_MS });
  const secure = (tls: TlsSettings): HttpTarget => ({
    source: "kubelet",
    baseUrl: opts.url,
    timeoutMs: opts.timeoutMs,
    proxy: chooseProxy(new URL(opts.url), env),
    tls,
    connections,
  });
  const verifying = secure({ verifyServer: true, ...(caPem ? { caPem } : {}), ...clientCert });
  const unverified = secure({ verifyServer: false, ...clientCert });
  const readonly: HttpTarget | undefined = opts.readonlyUrl === undefined ? undefined : {
    source: "kubelet",
    baseUrl: opts.readonlyUrl,
    timeoutMs: opts.timeoutMs,
    proxy: chooseProxy(new URL(opts.readonlyUrl), env),
    connections,
  };
  const pods = `GET ${opts.url}/pods`;
  const tokenNotSent = (why: string) =>
    failed<KubeletPods>(
      "kubelet",
      "misconfigured",
      `${pods}: ${why}, so the bearer token was not sent: ${HOW_TO_VERIFY}`,
      undefined,
      "kubelet certificate not verified, token not sent",
    );
  /** Set once the certificate did not verify against the cluster CA (the default only). */
  let askUnverified = ca.kind === "off";
  let readonlyAnswered = false;
  // Whichever port answered: the same body is the same list of pods.
  const memo = new AnswerMemo<Pod[]>();
  const podsGet = (bearerToken?: string) => ({
    path: "/pods",
    schema: PodListSchema,
    memo,
    ...(bearerToken !== undefined ? { bearerToken } : {}),
  });
  /** A GET of `/pods`, its answer marked with whether it was read verified. */
  const ask = async (target: HttpTarget, verified: boolean, bearerToken?: string) => {
    const result = await getJson(target, podsGet(bearerToken));
    return result.ok ? succeeded<KubeletPods>({ pods: result.value, verified }) : result;
  };

  async function listSecure(): Promise<SourceResult<KubeletPods>> {
    if (askUnverified) {
      if (hasToken && creds.certPem === undefined) {
        return tokenNotSent(
          "kubeletCaFile is off, so the kubelet's serving certificate is not verified",
        );
      }
      return ask(unverified, false);
    }
    let bearerToken: string | undefined;
    if (hasToken) {
      const token = await readBearerToken(creds);
      if (!token.ok) return failed("kubelet", "unauthorized", `${pods}: ${token.error}`);
      bearerToken = token.token;
    }
    // The token is written only once the handshake has verified the certificate.
    const result = await ask(verifying, true, bearerToken);
    if (result.ok || result.failure.problem !== CERTIFICATE_NOT_VERIFIED) return result;
    // What the handshake said, without the request (and proxy) it was said of.
    const said = result.failure.message.slice(result.failure.message.indexOf(": ") + 2);
    const against = `the kubelet's serving certificate could not be verified against ${
      describeCa(ca, creds)
    } (${said})`;
    if (hasToken) return tokenNotSent(against);
    if (ca.kind === "file") {
      return failed("kubelet", "misconfigured", `${pods}: ${against}: ${HOW_TO_VERIFY}`);
    }
    askUnverified = true;
    opts.onUnverified?.(
      "the kubelet's serving certificate is not signed by the cluster CA: it is asked " +
        `unverified, with the client certificate only, and ${ADDS_NO_PARENT}; to verify it, ` +
        `set kubeletCaFile (for a kubelet's own self-signed certificate: ` +
        `${SELF_SIGNED_KUBELET_CA}), or set kubeletCaFile to off to ask it unverified without ` +
        "this warning",
      { kubelet: opts.url, error: against },
    );
    return ask(unverified, false);
  }

  return {
    async listPods() {
      const first = await listSecure();
      if (first.ok || readonly === undefined) return first;
      const second = await ask(readonly, false);
      if (second.ok) {
        if (!readonlyAnswered) {
          readonlyAnswered = true;
          opts.onUnverified?.(
            `the kubelet's read-only port answered (plain HTTP, not verified): ${ADDS_NO_PARENT}`,
            { kubelet: opts.readonlyUrl!, error: first.failure.message },
          );
        }
        return second;
      }
      return failed(
        "kubelet",
        first.failure.kind,
        `${first.failure.message}; read-only port: ${second.failure.message}`,
        first.failure.status,
        first.failure.problem,
      );
    },
  };
}
