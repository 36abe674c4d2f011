/**
 * When the node's credentials expire: the kubeconfig's client certificate and cluster CA, and
 * the kubelet CA file when one is configured. Read from the files as they are now, through the
 * parser the clients are built with (kubeconfig.ts), so what is said is what the next rebuild of
 * the clients would use.
 *
 * Of a chain or a bundle, the certificate that expires first is the one that counts: a chain is
 * broken by its first expiry, and of a CA bundle kept through a rotation the old CA is said, an
 * early warning rather than a late one.
 */
import { X509Certificate } from "node:crypto";
import { type Config, KUBELET_CA_OFF } from "../config/types.ts";
import { certificateBlocks, loadKubeconfig } from "./kubeconfig.ts";

export const CERTIFICATES = ["client", "cluster-ca", "kubelet-ca"] as const;
export type CertificateName = typeof CERTIFICATES[number];

/** The notAfter of the PEM's certificate that expires first; undefined if none parses. */
export function firstExpiry(pem: string): Date | undefined {
  let first: Date | undefined;
  for (const block of certificateBlocks(pem)) {
    let notAfter: Date;
    try {
      notAfter = new X509Certificate(block).validToDate;
    } catch {
      return undefined;
    }
    if (first === undefined || notAfter < first) first = notAfter;
  }
  return first;
}

/**
 * The expiry of each certificate configured and readable now; one that is not configured (a
 * token instead of a client certificate, no kubeletCaFile) or cannot be read is left out.
 */
export function certificateExpiries(
  config: Pick<Config, "kubeconfig" | "kubeletCaFile">,
): Map<CertificateName, Date> {
  const pems = new Map<CertificateName, string | undefined>();
  const kubeconfig = loadKubeconfig(config.kubeconfig);
  if (kubeconfig.ok) {
    pems.set("client", kubeconfig.credentials.certPem);
    pems.set("cluster-ca", kubeconfig.credentials.caPem);
  }
  if (config.kubeletCaFile !== undefined && config.kubeletCaFile !== KUBELET_CA_OFF) {
    try {
      pems.set("kubelet-ca", Deno.readTextFileSync(config.kubeletCaFile));
    } catch {
      // Unreadable: the kubelet source fails as misconfigured and says why.
    }
  }
  const expiries = new Map<CertificateName, Date>();
  for (const [name, pem] of pems) {
    const notAfter = pem === undefined ? undefined : firstExpiry(pem);
    if (notAfter !== undefined) expiries.set(name, notAfter);
  }
  return expiries;
}
