/** Loading kubeconfigs as kubectl reads them: files and -data, relative paths, tokens, errors. */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { stringify as stringifyYaml } from "yaml";
import { type Credentials, loadKubeconfig, readBearerToken } from "../../lib/sources/kubeconfig.ts";
import { writeKubeconfig } from "../../lib/sim/pki.ts";
import { sec1Key, simCluster, withTempDir } from "../sim/harness.ts";

const SERVER = "https://127.0.0.1:6443";

function loaded(path: string): Credentials {
  const result = loadKubeconfig(path);
  if (!result.ok) throw new Error(`expected a kubeconfig, got: ${result.error}`);
  return result.credentials;
}

function loadError(path: string): string {
  const result = loadKubeconfig(path);
  assert(!result.ok, "expected the kubeconfig to be refused");
  return result.error;
}

/** Writes a hand-made kubeconfig whose current context uses the given cluster and user. */
async function writeYaml(
  dir: string,
  cluster: Record<string, unknown>,
  user: Record<string, unknown>,
  extra: Record<string, unknown> = {},
): Promise<string> {
  const path = `${dir}/config`;
  await Deno.writeTextFile(
    path,
    stringifyYaml({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "c", cluster }],
      users: [{ name: "u", user }],
      contexts: [{ name: "ctx", context: { cluster: "c", user: "u" } }],
      "current-context": "ctx",
      ...extra,
    }),
  );
  return path;
}

Deno.test("kubeconfig with inline -data yields the PEMs it embeds", async () => {
  const { ca, nodeClient } = await simCluster();
  await withTempDir(async (dir) => {
    const path = await writeKubeconfig(dir, {
      server: SERVER,
      caPem: ca.certPem,
      client: nodeClient,
      embed: "inline",
    });
    assertEquals(loaded(path), {
      server: SERVER,
      insecure: false,
      caPem: ca.certPem,
      caOrigin: `kubeconfig ${path}: clusters[0].cluster.certificate-authority-data`,
      certPem: nodeClient.certPem,
      keyPem: nodeClient.keyPem,
    });
  });
});

Deno.test("kubeconfig file references resolve against the kubeconfig's directory", async () => {
  const { ca, nodeClient } = await simCluster();
  await withTempDir(async (dir) => {
    // The files are written next to the kubeconfig and named relatively ("ca.crt"); the test
    // runs from the repository, so resolving against the working directory would fail.
    const path = await writeKubeconfig(dir, {
      server: SERVER,
      caPem: ca.certPem,
      client: nodeClient,
      embed: "files",
    });
    const creds = loaded(path);
    assertEquals(creds.caPem, ca.certPem);
    assertEquals(creds.caOrigin, `kubeconfig ${path}: clusters[0].cluster.certificate-authority`);
    assertEquals(creds.certPem, nodeClient.certPem);
    assertEquals(creds.keyPem, nodeClient.keyPem);
  });
});

Deno.test("kubeconfig accepts absolute paths and the key formats kubelets and kubeadm write", async () => {
  const { ca, nodeClient } = await simCluster();
  await withTempDir(async (dir) => {
    // kubelet-client-current.pem holds a SEC1 "EC PRIVATE KEY"; kubeadm writes PKCS#1 RSA.
    const sec1 = sec1Key(nodeClient.keyPem);
    await Deno.writeTextFile(`${dir}/client.pem`, `${nodeClient.certPem}${sec1}`);
    await Deno.writeTextFile(`${dir}/ca.pem`, ca.certPem);
    const path = await writeYaml(dir, {
      server: SERVER,
      "certificate-authority": `${dir}/ca.pem`,
    }, { "client-certificate": `${dir}/client.pem`, "client-key": `${dir}/client.pem` });
    const creds = loaded(path);
    assertEquals(creds.caPem, ca.certPem);
    assertEquals(creds.caOrigin, `kubeconfig ${path}: clusters[0].cluster.certificate-authority`);
    assertEquals(creds.certPem, nodeClient.certPem);
    assertEquals(creds.keyPem, sec1);
  });
});

Deno.test("kubeconfig reads insecure-skip-tls-verify and tls-server-name", async () => {
  await withTempDir(async (dir) => {
    const path = await writeYaml(dir, {
      server: `${SERVER}/`,
      "insecure-skip-tls-verify": true,
      "tls-server-name": "kubernetes.default.svc",
    }, {});
    assertEquals(loaded(path), {
      server: SERVER,
      insecure: true,
      tlsServerName: "kubernetes.default.svc",
    });
  });
});

Deno.test("kubeconfig token is sent as is", async () => {
  await withTempDir(async (dir) => {
    const creds = loaded(await writeYaml(dir, { server: SERVER }, { token: "abc" }));
    assertEquals(creds.token, "abc");
    assertEquals(await readBearerToken(creds), { ok: true, token: "abc" });
  });
});

Deno.test("kubeconfig tokenFile is resolved relatively and re-read on every request", async () => {
  await withTempDir(async (dir) => {
    await Deno.mkdir(`${dir}/tokens`);
    await Deno.writeTextFile(`${dir}/tokens/token`, "first\n");
    const creds = loaded(await writeYaml(dir, { server: SERVER }, { tokenFile: "tokens/token" }));
    assertEquals(creds.tokenFile, `${dir}/tokens/token`);
    assertEquals(await readBearerToken(creds), { ok: true, token: "first" });
    // Projected service-account tokens are rotated by replacing the file.
    await Deno.writeTextFile(`${dir}/tokens/token`, "second");
    assertEquals(await readBearerToken(creds), { ok: true, token: "second" });
    await Deno.remove(`${dir}/tokens/token`);
    const gone = await readBearerToken(creds);
    assert(
      !gone.ok && gone.error.startsWith(`cannot read token file ${dir}/tokens/token: no such file`),
    );
  });
});

Deno.test("kubeconfig uses the current context, not the first one", async () => {
  const { ca } = await simCluster();
  await withTempDir(async (dir) => {
    const path = `${dir}/config`;
    await Deno.writeTextFile(
      path,
      stringifyYaml({
        clusters: [
          { name: "other", cluster: { server: "https://10.0.0.1:6443" } },
          {
            name: "local",
            cluster: {
              server: SERVER,
              "certificate-authority-data": new TextEncoder().encode(ca.certPem).toBase64(),
            },
          },
        ],
        users: [{ name: "admin", user: { token: "admin" } }, {
          name: "node",
          user: { token: "n" },
        }],
        contexts: [
          { name: "a", context: { cluster: "other", user: "admin" } },
          { name: "b", context: { cluster: "local", user: "node" } },
        ],
        "current-context": "b",
      }),
    );
    assertEquals(loaded(path), {
      server: SERVER,
      insecure: false,
      caPem: ca.certPem,
      caOrigin: `kubeconfig ${path}: clusters[1].cluster.certificate-authority-data`,
      token: "n",
    });
  });
});

Deno.test("a cluster's proxy-url is read as client-go reads it", async () => {
  await withTempDir(async (dir) => {
    for (
      const proxy of ["http://p:3128", "https://u:pw@p", "socks5://10.0.0.1:1080", "socks5h://p"]
    ) {
      const path = await writeYaml(dir, { server: SERVER, "proxy-url": proxy }, {});
      assertEquals(loaded(path).proxyUrl?.href, new URL(proxy).href);
    }
  });
});

Deno.test("kubeconfig errors name the field that is wrong", async () => {
  const { nodeClient } = await simCluster();
  await withTempDir(async (dir) => {
    const cases: [
      Record<string, unknown>,
      Record<string, unknown>,
      Record<string, unknown>,
      string,
    ][] = [
      [
        { server: SERVER },
        { "client-certificate": "c.crt", "client-key": "/x" },
        {},
        "users[0].user.client-key: cannot read /x: no such file or directory",
      ],
      [{}, {}, {}, "clusters[0].cluster.server: missing"],
      [
        { server: "ftp://host" },
        {},
        {},
        'clusters[0].cluster.server: not an http(s) URL: "ftp://host"',
      ],
      [{ server: SERVER }, {}, { "current-context": undefined }, "current-context: missing"],
      [
        { server: SERVER },
        {},
        { "current-context": "nope" },
        'current-context: "nope" not found in contexts',
      ],
      [
        { server: SERVER },
        {},
        { contexts: [{ name: "ctx", context: { cluster: "c", user: "ghost" } }] },
        'contexts[0].context.user: "ghost" not found in users',
      ],
      [
        { server: SERVER, "certificate-authority-data": "!!!" },
        {},
        {},
        "clusters[0].cluster.certificate-authority-data: not valid base64",
      ],
      [
        { server: SERVER, "certificate-authority": "ca.crt", "certificate-authority-data": "QQ==" },
        {},
        {},
        "clusters[0].cluster.certificate-authority-data: set together with certificate-authority; use one",
      ],
      [
        { server: SERVER, "insecure-skip-tls-verify": true, "certificate-authority": "ca.crt" },
        {},
        {},
        "clusters[0].cluster.insecure-skip-tls-verify: set together with a certificate authority; use one",
      ],
      [
        { server: SERVER },
        { "client-certificate": "c.crt" },
        {},
        "users[0].user.client-key: missing (client-certificate is set)",
      ],
      [
        { server: SERVER },
        { tokenFile: "missing-token" },
        {},
        `users[0].user.tokenFile: cannot read ${dir}/missing-token: no such file or directory`,
      ],
      [
        { server: SERVER },
        { exec: { command: "aws" } },
        {},
        "users[0].user.exec: not supported: use a client certificate or a token",
      ],
      [
        { server: SERVER, "insecure-skip-tls-verify": "yes" },
        {},
        {},
        "clusters[0].cluster.insecure-skip-tls-verify: expected boolean, received string",
      ],
      [
        { server: SERVER, "proxy-url": "proxy.corp:3128" },
        {},
        {},
        'clusters[0].cluster.proxy-url: "proxy.corp:3128": proxy scheme proxy.corp: is not ' +
        "supported (http, https, socks5, socks5h)",
      ],
    ];
    await Deno.writeTextFile(`${dir}/c.crt`, nodeClient.certPem);
    await Deno.writeTextFile(`${dir}/ca.crt`, nodeClient.certPem);
    for (const [cluster, user, extra, expected] of cases) {
      const error = loadError(await writeYaml(dir, cluster, user, extra));
      const prefix = `kubeconfig ${dir}/config: `;
      assert(
        error.startsWith(`${prefix}${expected}`),
        `expected "${prefix}${expected}…", got "${error}"`,
      );
    }
  });
});

Deno.test("kubeconfig refuses a client key that is not a PEM private key", async () => {
  const { nodeClient } = await simCluster();
  const data = (text: string) => new TextEncoder().encode(text).toBase64();
  const corrupt = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
  await withTempDir(async (dir) => {
    const cases: [string, string][] = [
      // The certificate where the key should be: a classic copy-paste mistake.
      [nodeClient.certPem, "the decoded data holds no PEM private key"],
      [corrupt, "the decoded data is not a valid PEM private key"],
    ];
    for (const [key, expected] of cases) {
      const path = await writeYaml(dir, { server: SERVER }, {
        "client-certificate-data": data(nodeClient.certPem),
        "client-key-data": data(key),
      });
      const error = loadError(path);
      assert(error.includes(`users[0].user.client-key-data: ${expected}`), error);
    }
  });
});

Deno.test("kubeconfig that does not exist or is not YAML is named in the error", async () => {
  await withTempDir(async (dir) => {
    assertEquals(
      loadError(`${dir}/absent`),
      `cannot read kubeconfig ${dir}/absent: no such file or directory (set kubeconfig, ` +
        "--kubeconfig, to the file with the agent's credentials)",
    );
    await Deno.writeTextFile(`${dir}/config`, "clusters: [unclosed");
    assert(
      loadError(`${dir}/config`).startsWith(`kubeconfig ${dir}/config: document: not valid YAML`),
    );
  });
});

Deno.test("kubeconfig names every file it was read from, so that a change can be noticed", async () => {
  const { ca, nodeClient } = await simCluster();
  await withTempDir(async (dir) => {
    const withFiles = await writeKubeconfig(dir, {
      server: SERVER,
      caPem: ca.certPem,
      client: nodeClient,
      tokenFile: "token",
      embed: "files",
    });
    await Deno.writeTextFile(`${dir}/token`, "t0k3n");
    // The token file is read on every request anyway: not a file to watch.
    assertEquals(loadKubeconfig(withFiles).files, [
      withFiles,
      `${dir}/ca.crt`,
      `${dir}/client.crt`,
      `${dir}/client.key`,
    ]);
    // A file that could not be read is named too: its appearing is a change.
    await Deno.remove(`${dir}/client.key`);
    const broken = loadKubeconfig(withFiles);
    assert(!broken.ok);
    assertEquals(broken.files, [
      withFiles,
      `${dir}/ca.crt`,
      `${dir}/client.crt`,
      `${dir}/client.key`,
    ]);
    const inline = await writeKubeconfig(dir, {
      server: SERVER,
      caPem: ca.certPem,
      client: nodeClient,
      embed: "inline",
    });
    assertEquals(loadKubeconfig(inline).files, [inline]);
    assertEquals(loadKubeconfig(`${dir}/absent`).files, [`${dir}/absent`]);
  });
});
