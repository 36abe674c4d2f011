/**
 * An in-process PKI for the simulated API server and kubelet: a CA, server and client
 * certificates signed by it, and the self-signed serving certificate a kubelet makes for itself.
 * ECDSA P-256 through WebCrypto; everything comes out as PEM, the form kubeconfigs and node:tls use.
 */
import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { stringify as stringifyYaml } from "yaml";

const KEY_ALGORITHM = { name: "ECDSA", namedCurve: "P-256" } as const;
const SIGNING_ALGORITHM = { name: "ECDSA", hash: "SHA-256" } as const;
const DAY_MS = 24 * 60 * 60 * 1000;

/** The names a loopback server answers to: kubeconfigs may say 127.0.0.1, [::1] or localhost. */
const LOOPBACK_NAMES: x509.JsonGeneralNames = [
  { type: "ip", value: "127.0.0.1" },
  { type: "ip", value: "::1" },
  { type: "dns", value: "localhost" },
];

export interface CertAndKey {
  certPem: string;
  keyPem: string;
}

export interface ClientIdentity {
  /** The user name the API server sees. */
  commonName: string;
  /** Groups, e.g. `system:nodes`. */
  organizations?: string[];
}

/** When a certificate is valid. */
export interface Validity {
  notBefore: Date;
  notAfter: Date;
}

export interface SimCa {
  certPem: string;
  /** A serving certificate for loopback (127.0.0.1, ::1, localhost) and `dnsNames`. */
  issueServerCert(commonName?: string, dnsNames?: string[]): Promise<CertAndKey>;
  /** Valid from a day ago for a year unless `validity` says otherwise (an expired one, say). */
  issueClientCert(identity: ClientIdentity, validity?: Validity): Promise<CertAndKey>;
}

function generateKeys(): Promise<CryptoKeyPair> {
  return crypto.subtle.generateKey(KEY_ALGORITHM, true, ["sign", "verify"]) as Promise<
    CryptoKeyPair
  >;
}

/** PEM files end with a newline; @peculiar/x509 leaves it out. */
function pemFile(pem: string): string {
  return pem.endsWith("\n") ? pem : `${pem}\n`;
}

function certificatePem(cert: x509.X509Certificate): string {
  return pemFile(cert.toString("pem"));
}

async function privateKeyPem(key: CryptoKey): Promise<string> {
  const pkcs8 = await crypto.subtle.exportKey("pkcs8", key);
  return pemFile(x509.PemConverter.encode(pkcs8, "PRIVATE KEY"));
}

/** Valid from a day ago, so a clock a little behind the issuer's does not reject it. */
function validity(): Validity {
  const now = Date.now();
  return { notBefore: new Date(now - DAY_MS), notAfter: new Date(now + 365 * DAY_MS) };
}

function distinguishedName(commonName: string, organizations: string[] = []): x509.JsonName {
  return [{ CN: [commonName] }, ...organizations.map((o) => ({ O: [o] }))];
}

async function leafExtensions(
  publicKey: CryptoKey,
  usage: x509.ExtendedKeyUsage,
  dnsNames: string[],
): Promise<x509.Extension[]> {
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
    new x509.ExtendedKeyUsageExtension([usage]),
    await x509.SubjectKeyIdentifierExtension.create(publicKey),
  ];
  if (usage === x509.ExtendedKeyUsage.serverAuth) {
    extensions.push(
      new x509.SubjectAlternativeNameExtension([
        ...LOOPBACK_NAMES,
        ...dnsNames.map((value) => ({ type: "dns" as const, value })),
      ]),
    );
  }
  return extensions;
}

export async function createSimCa(commonName = "ckpt-sim-ca"): Promise<SimCa> {
  const caKeys = await generateKeys();
  const caCert = await x509.X509CertificateGenerator.createSelfSigned({
    name: distinguishedName(commonName),
    keys: caKeys,
    signingAlgorithm: SIGNING_ALGORITHM,
    ...validity(),
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign |
          x509.KeyUsageFlags.digitalSignature,
        true,
      ),
      await x509.SubjectKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  });

  async function issue(
    subject: x509.JsonName,
    usage: x509.ExtendedKeyUsage,
    dnsNames: string[] = [],
    valid: Validity = validity(),
  ): Promise<CertAndKey> {
    const keys = await generateKeys();
    const cert = await x509.X509CertificateGenerator.create({
      subject,
      issuer: caCert.subject,
      publicKey: keys.publicKey,
      signingKey: caKeys.privateKey,
      signingAlgorithm: SIGNING_ALGORITHM,
      ...valid,
      extensions: [
        ...await leafExtensions(keys.publicKey, usage, dnsNames),
        await x509.AuthorityKeyIdentifierExtension.create(caKeys.publicKey),
      ],
    });
    return { certPem: certificatePem(cert), keyPem: await privateKeyPem(keys.privateKey) };
  }

  return {
    certPem: certificatePem(caCert),
    issueServerCert: (cn = "localhost", dnsNames = []) =>
      issue(distinguishedName(cn), x509.ExtendedKeyUsage.serverAuth, dnsNames),
    issueClientCert: ({ commonName, organizations }, valid) =>
      issue(
        distinguishedName(commonName, organizations),
        x509.ExtendedKeyUsage.clientAuth,
        [],
        valid,
      ),
  };
}

/**
 * What a kubelet without `--tls-cert-file` serves: a certificate it signed itself, trusted by
 * nobody. It is its own issuer, so a client pinning it as a CA can verify it.
 */
export async function createSelfSignedServerCert(commonName = "sim-node"): Promise<CertAndKey> {
  const keys = await generateKeys();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    name: distinguishedName(commonName),
    keys,
    signingAlgorithm: SIGNING_ALGORITHM,
    ...validity(),
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyCertSign,
        true,
      ),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension(LOOPBACK_NAMES),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: certificatePem(cert), keyPem: await privateKeyPem(keys.privateKey) };
}

export interface KubeconfigSpec {
  server: string;
  caPem?: string;
  client?: CertAndKey;
  token?: string;
  /** Written into the kubeconfig as given (relative paths resolve against its directory). */
  tokenFile?: string;
  insecure?: boolean;
  /** "files": PEMs written next to the kubeconfig and referenced by relative path;
   *  "inline": `-data` fields. */
  embed: "files" | "inline";
}

const CA_FILE = "ca.crt";
const CLIENT_CERT_FILE = "client.crt";
const CLIENT_KEY_FILE = "client.key";

function base64(text: string): string {
  return new TextEncoder().encode(text).toBase64();
}

/** Writes `<dir>/kubeconfig` (and the PEM files it references) and returns its path. */
export async function writeKubeconfig(dir: string, spec: KubeconfigSpec): Promise<string> {
  const inline = spec.embed === "inline";
  const pem = async (file: string, content: string, mode: number) => {
    if (inline) return base64(content);
    await Deno.writeTextFile(`${dir}/${file}`, content, { mode });
    return file;
  };
  const suffix = inline ? "-data" : "";
  const cluster: Record<string, unknown> = { server: spec.server };
  if (spec.caPem !== undefined) {
    cluster[`certificate-authority${suffix}`] = await pem(CA_FILE, spec.caPem, 0o644);
  }
  if (spec.insecure) cluster["insecure-skip-tls-verify"] = true;
  const user: Record<string, unknown> = {};
  if (spec.client) {
    user[`client-certificate${suffix}`] = await pem(CLIENT_CERT_FILE, spec.client.certPem, 0o644);
    user[`client-key${suffix}`] = await pem(CLIENT_KEY_FILE, spec.client.keyPem, 0o600);
  }
  if (spec.token !== undefined) user.token = spec.token;
  if (spec.tokenFile !== undefined) user.tokenFile = spec.tokenFile;
  const document = {
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "sim", cluster }],
    users: [{ name: "sim-user", user }],
    contexts: [{ name: "sim", context: { cluster: "sim", user: "sim-user" } }],
    "current-context": "sim",
  };
  const path = `${dir}/kubeconfig`;
  await Deno.writeTextFile(path, stringifyYaml(document), { mode: 0o600 });
  return path;
}
