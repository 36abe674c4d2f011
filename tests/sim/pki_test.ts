/** The simulated PKI issues what real clusters use: loopback serving certs, node client certs. */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { parse as parseYaml } from "yaml";
import { createSelfSignedServerCert, createSimCa, writeKubeconfig } from "../../lib/sim/pki.ts";
import { withTempDir } from "./harness.ts";

Deno.test("sim CA issues loopback serving certificates and named client certificates", async () => {
  const ca = await createSimCa("test-ca");
  const caCert = new X509Certificate(ca.certPem);
  assertEquals(caCert.ca, true);

  const server = new X509Certificate((await ca.issueServerCert()).certPem);
  assert(server.checkIssued(caCert) && server.verify(caCert.publicKey));
  assertEquals(server.ca, false);
  assertEquals(server.checkIP("127.0.0.1"), "127.0.0.1");
  assertEquals(server.checkIP("::1"), "::1");
  assertEquals(server.checkHost("localhost"), "localhost");
  assertEquals(server.checkHost("example.com"), undefined);

  const client = new X509Certificate(
    (await ca.issueClientCert({ commonName: "system:node:n1", organizations: ["system:nodes"] }))
      .certPem,
  );
  assert(client.checkIssued(caCert));
  assert(client.subject.includes("CN=system:node:n1") && client.subject.includes("O=system:nodes"));
});

Deno.test("a kubelet's self-signed certificate is its own issuer", async () => {
  const cert = new X509Certificate((await createSelfSignedServerCert("n1")).certPem);
  assert(cert.checkIssued(cert) && cert.verify(cert.publicKey));
  assertEquals(cert.checkIP("127.0.0.1"), "127.0.0.1");
});

Deno.test("writeKubeconfig writes files next to the kubeconfig, the key private", async () => {
  const ca = await createSimCa();
  const client = await ca.issueClientCert({ commonName: "u" });
  await withTempDir(async (dir) => {
    const path = await writeKubeconfig(dir, {
      server: "https://127.0.0.1:1",
      caPem: ca.certPem,
      client,
      embed: "files",
    });
    const doc = parseYaml(await Deno.readTextFile(path));
    assertEquals(doc.clusters[0].cluster["certificate-authority"], "ca.crt");
    assertEquals(doc.users[0].user["client-key"], "client.key");
    assertEquals((await Deno.stat(`${dir}/client.key`)).mode! & 0o777, 0o600);
    assertEquals(await Deno.readTextFile(`${dir}/client.key`), client.keyPem);
  });
});
