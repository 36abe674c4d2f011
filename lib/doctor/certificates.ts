/**
 * The certificates the agent depends on: the kubeconfig's client certificate (with its chain),
 * the kubeconfig's cluster CA, and the kubelet CA file when one is set. Each must be valid now
 * and for EXPIRY_WARNING_MS more: an expired client certificate makes the API server look
 * unavailable while it is up.
 */
import { X509Certificate } from "node:crypto";
import { type Config, KUBELET_CA_OFF } from "../config/types.ts";
import { certificateBlocks, type KubeconfigResult } from "../sources/kubeconfig.ts";
import { error, type Finding, ok, warning } from "./finding.ts";

export const EXPIRY_WARNING_MS = 30 * 24 * 3600 * 1000;

interface Subject {
  /** What the certificates are, in words: "the kubeconfig's client certificate". */
  what: string;
  /** Where they come from, to renew or correct them. */
  where: string;
  /** How to renew them. */
  renew: string;
}

function day(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** One finding per certificate in `pem` (a chain or a bundle), judged at `now`. */
export function pemFindings(subject: Subject, pem: string, now: number): Finding[] {
  const blocks = certificateBlocks(pem);
  if (blocks.length === 0) {
    return [error(
      "certificate",
      subject.where,
      `${subject.what} (${subject.where}) holds no PEM certificate`,
      subject.renew,
    )];
  }
  return blocks.map((block, i) => {
    const label = blocks.length === 1 ? subject.what : `${subject.what}, certificate ${i + 1}`;
    let cert: X509Certificate;
    try {
      cert = new X509Certificate(block);
    } catch (e) {
      return error(
        "certificate",
        subject.where,
        `${label} (${subject.where}) is not a valid certificate: ${(e as Error).message}`,
        subject.renew,
      );
    }
    const from = Date.parse(cert.validFrom), to = Date.parse(cert.validTo);
    const named = `${label} (${cert.subject.replaceAll("\n", ", ")}, ${subject.where})`;
    if (now < from) {
      return error(
        "certificate",
        subject.where,
        `${named} is not valid before ${day(from)}: ahead of the node's clock`,
        `check the node's clock; else ${subject.renew}`,
      );
    }
    if (now > to) {
      return error("certificate", subject.where, `${named} expired on ${day(to)}`, subject.renew);
    }
    const days = Math.floor((to - now) / (24 * 3600 * 1000));
    if (to - now < EXPIRY_WARNING_MS) {
      return warning(
        "certificate",
        subject.where,
        `${named} expires on ${day(to)}, in ${days} days`,
        subject.renew,
      );
    }
    return ok("certificate", subject.where, `${named} is valid until ${day(to)}`);
  });
}

const RELOADED = "; the agent reads it again on its next pass";

async function kubeletCaFindings(config: Config, now: number): Promise<Finding[]> {
  const file = config.kubeletCaFile;
  if (file === undefined || file === KUBELET_CA_OFF) return [];
  const subject: Subject = {
    what: "the kubelet CA",
    where: file,
    renew: `put the CA that signs the kubelet's serving certificate in ${file} (kubeletCaFile)` +
      RELOADED,
  };
  let pem: string;
  try {
    pem = await Deno.readTextFile(file);
  } catch (e) {
    return [error(
      "certificate",
      file,
      `the kubelet CA ${file} (kubeletCaFile) cannot be read: ${(e as Error).message}`,
      subject.renew,
    )];
  }
  return pemFindings(subject, pem, now);
}

export async function certificateFindings(
  config: Config,
  kubeconfig: KubeconfigResult,
  now: number,
): Promise<Finding[]> {
  const findings: Finding[] = [];
  const where = `kubeconfig ${config.kubeconfig}`;
  if (!kubeconfig.ok) {
    findings.push(warning(
      "certificate",
      config.kubeconfig,
      `the kubeconfig's certificates not checked: ${kubeconfig.error}`,
      `correct ${config.kubeconfig} (kubeconfig, --kubeconfig) as the message says`,
    ));
  } else {
    const { certPem, caPem, caOrigin } = kubeconfig.credentials;
    if (certPem !== undefined) {
      findings.push(...pemFindings(
        {
          what: "the kubeconfig's client certificate",
          where,
          renew: `renew it, or point the kubeconfig at the kubelet's rotating certificate ` +
            `(/var/lib/kubelet/pki/kubelet-client-current.pem)${RELOADED}`,
        },
        certPem,
        now,
      ));
    }
    if (caPem !== undefined) {
      findings.push(...pemFindings(
        {
          what: "the kubeconfig's cluster CA",
          where: caOrigin ?? where,
          renew: `put the cluster's current CA in the kubeconfig${RELOADED}`,
        },
        caPem,
        now,
      ));
    }
  }
  findings.push(...await kubeletCaFindings(config, now));
  return findings;
}
