/**
 * Certificates judged by their validity: issued by a real (in-process) CA with the validity each
 * case needs, read from PEM as the kubeconfig and the kubelet CA file hold them.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { EXPIRY_WARNING_MS, pemFindings } from "../../lib/doctor/certificates.ts";
import { createSimCa, type Validity } from "../../lib/sim/pki.ts";

const DAY_MS = 24 * 3600 * 1000;
const NOW = Date.parse("2026-06-01T12:00:00Z");
const SUBJECT = { what: "the client certificate", where: "kubeconfig /k", renew: "renew it" };

function validFor(fromDays: number, toDays: number): Validity {
  return {
    notBefore: new Date(NOW + fromDays * DAY_MS),
    notAfter: new Date(NOW + toDays * DAY_MS),
  };
}

const ca = await createSimCa();
const issue = async (validity: Validity) =>
  (await ca.issueClientCert({ commonName: "system:node:cp-1" }, validity)).certPem;

Deno.test("valid, expiring within 30 days, expired, not yet valid", async () => {
  assertEquals(EXPIRY_WARNING_MS, 30 * DAY_MS);
  const cases: [Validity, string, string, string?][] = [
    [validFor(-10, 300), "ok", "is valid until 2027-03-28T12:00:00Z"],
    [validFor(-300, 29), "warning", "expires on 2026-06-30T12:00:00Z, in 29 days", "renew it"],
    [validFor(-300, -1), "error", "expired on 2026-05-31T12:00:00Z", "renew it"],
    [
      validFor(2, 300),
      "error",
      "is not valid before 2026-06-03T12:00:00Z",
      "check the node's clock; else renew it",
    ],
  ];
  for (const [validity, level, said, fix] of cases) {
    const [finding] = pemFindings(SUBJECT, await issue(validity), NOW);
    assertEquals([finding.check, finding.level], ["certificate", level], finding.found);
    assert(finding.found.includes(said), finding.found);
    assert(finding.found.includes("CN=system:node:cp-1"), finding.found);
    // What to change, unless all is well.
    assertEquals(finding.fix, fix);
  }
});

Deno.test("each certificate of a chain or bundle is judged; no certificate at all is an error", async () => {
  const bundle = [validFor(-10, 300), validFor(-400, 100), validFor(-10, 5)].map(issue);
  const pem = (await Promise.all(bundle)).join("");
  assertEquals(
    pemFindings(SUBJECT, pem, NOW).map((f) => [f.level, f.found.split(" (")[0]]),
    [
      ["ok", "the client certificate, certificate 1"],
      ["ok", "the client certificate, certificate 2"],
      ["warning", "the client certificate, certificate 3"],
    ],
  );
  const [none] = pemFindings(SUBJECT, "not a certificate\n", NOW);
  assertEquals(none.level, "error");
  assert(none.found.includes("holds no PEM certificate"), none.found);
});
