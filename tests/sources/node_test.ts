/**
 * The node's sources as the daemon holds them for days: rebuilt when the kubeconfig or the
 * certificates it names change (a rotated kubelet client certificate, a kubeconfig written after
 * the agent started), and not otherwise.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { dirname, join } from "node:path";
import { connectNode } from "../../lib/sources/node.ts";
import { createSimCa } from "../../lib/sim/pki.ts";
import { withNode } from "../helpers/sim_node.ts";
import { until } from "../helpers/until.ts";

/** Files written by a test are at once older than the racily-clean margin. */
const later = () => Date.now() + 2_000;

/** Replaces a file with a new one (a new inode), as a rotation that repoints a link does. */
async function replace(path: string, content: string) {
  await Deno.writeTextFile(`${path}.new`, content, { mode: 0o600 });
  await Deno.rename(`${path}.new`, path);
}

Deno.test("a client certificate replaced on disk is used from the next pass on", async () => {
  await withNode(async (node) => {
    const dir = dirname(node.kubeconfig);
    const [cert, key] = ["client.crt", "client.key"].map((file) => join(dir, file));
    const valid = { certPem: await Deno.readTextFile(cert), keyPem: await Deno.readTextFile(key) };
    const reloads: (readonly string[])[] = [];
    const sources = await connectNode(node.config(), {
      now: later,
      onReload: (files) => reloads.push(files),
    });
    assert((await sources.apiServer.listNodePods(node.nodeName)).ok);
    assert((await sources.apiServer.listNodePods(node.nodeName)).ok);
    assertEquals(reloads.length, 0);

    // A certificate the API server does not trust: if the old one were still in use, the
    // listing would go on succeeding.
    const stranger = await (await createSimCa("another-ca")).issueClientCert({
      commonName: "system:node:cp-1",
    });
    await replace(cert, stranger.certPem);
    await replace(key, stranger.keyPem);
    assert(!(await sources.apiServer.listNodePods(node.nodeName)).ok);
    assertEquals(reloads.length, 1);
    assert(reloads[0].includes(cert) && reloads[0].includes(key));

    await replace(cert, valid.certPem);
    await replace(key, valid.keyPem);
    assert((await sources.apiServer.listNodePods(node.nodeName)).ok);
    assert((await sources.kubelet.listPods()).ok);
    assertEquals(reloads.length, 2);
  });
});

Deno.test("a kubeconfig that appears after the start is picked up", async () => {
  await withNode(async (node) => {
    const aside = `${node.kubeconfig}.aside`;
    await Deno.rename(node.kubeconfig, aside);
    const reloads: (readonly string[])[] = [];
    const sources = await connectNode(node.config(), {
      now: later,
      onReload: (files) => reloads.push(files),
    });
    const before = await sources.apiServer.listNodePods(node.nodeName);
    assert(!before.ok);
    assertEquals(before.failure.kind, "misconfigured");

    await Deno.rename(aside, node.kubeconfig);
    assert((await sources.apiServer.listNodePods(node.nodeName)).ok);
    assertEquals(reloads.length, 1);
  });
});

Deno.test("files written just before the start are read again until settled, with no notice", async () => {
  await withNode(async (node) => {
    // The node's files were written just now: nothing is remembered of them until they are
    // older than the racily-clean margin, so a change in the clock tick of the first read
    // cannot go unseen; those readings are no change to report.
    let now = Date.now();
    const reloads: (readonly string[])[] = [];
    const sources = await connectNode(node.config(), {
      now: () => now,
      onReload: (files) => reloads.push(files),
    });
    for (let pass = 0; pass < 3; pass++) {
      assert((await sources.apiServer.listNodePods(node.nodeName)).ok);
      assert((await sources.kubelet.listPods()).ok);
      now += 1_000;
    }
    assertEquals(reloads.length, 0);
  });
});

Deno.test("watching: files read again until settled, or written again as they were, keep the clients and their watches", async () => {
  await withNode(async (node) => {
    const dir = dirname(node.kubeconfig);
    const [cert, key] = ["client.crt", "client.key"].map((file) => join(dir, file));
    let now = Date.now();
    const sources = await connectNode(node.config(), { now: () => now, watch: true });
    try {
      await until(
        "the pods are watched",
        () => sources.apiServer.watchedNodePods?.(node.nodeName) !== undefined,
      );
      node.apiServer.setSecret("kube-system", "a", { key: "a" });
      sources.apiServer.watchObjects?.([{ kind: "secret", namespace: "kube-system", name: "a" }]);
      await until("the object is watched", () => node.apiServer.watchesOpen() === 2);
      const watches = node.apiServer.requestsByVerb().watch;
      for (let pass = 0; pass < 3; pass++) {
        assert((await sources.apiServer.listNodePods(node.nodeName)).ok);
        now += 1_000;
      }
      await replace(cert, await Deno.readTextFile(cert));
      await replace(key, await Deno.readTextFile(key));
      now += 2_000;
      assert((await sources.apiServer.listNodePods(node.nodeName)).ok);
      assertEquals(node.apiServer.requestsByVerb().watch, watches);
      assertEquals(node.apiServer.watchesOpen(), 2);
    } finally {
      sources.close?.();
      sources.runtime.close();
    }
  });
});

Deno.test("kubeletCaFile: a file, the cluster CA when unset, off; an unreadable file is a configuration error", async () => {
  await withNode(async (node) => {
    const warnings: string[] = [];
    const log = {
      debug: () => {},
      info: () => {},
      warn: (msg: string) => void warnings.push(msg),
      error: () => {},
    };
    const listed = async (kubeletCaFile: string | undefined) => {
      const sources = await connectNode(node.config({ kubeletCaFile }), { now: later, log });
      try {
        return await sources.kubelet.listPods();
      } finally {
        sources.runtime.close();
      }
    };
    assert((await listed(node.kubeletCaFile)).ok);
    assertEquals(warnings, []);
    // The simulated kubelet's certificate is its own: the cluster CA does not verify it.
    assert((await listed(undefined)).ok);
    assertEquals(warnings.length, 1);
    assert((await listed("off")).ok);
    assertEquals(warnings.length, 1);
    const missing = await listed(join(node.root, "no-such-ca.crt"));
    assert(!missing.ok);
    assertEquals(missing.failure.kind, "misconfigured");
    assert(missing.failure.message.startsWith(`kubeletCaFile ${node.root}/no-such-ca.crt: `));
  });
});

Deno.test("watching: a rotated certificate ends the old client's watches, the new one watches the pods and the same objects with it", async () => {
  await withNode(async (node) => {
    const dir = dirname(node.kubeconfig);
    const [cert, key] = ["client.crt", "client.key"].map((file) => join(dir, file));
    const sources = await connectNode(node.config(), { now: later, watch: true });
    try {
      const watched = () => sources.apiServer.watchedNodePods?.(node.nodeName) !== undefined;
      await until("the pods are watched", watched);
      const refs = ["a", "b"].map((name) => {
        node.apiServer.setSecret("kube-system", name, { key: name });
        return { kind: "secret", namespace: "kube-system", name } as const;
      });
      sources.apiServer.watchObjects?.(refs);
      await until("the objects are watched", () => node.apiServer.watchesOpen() === 3);
      const before = node.apiServer.requestsByVerb().watch;
      // A new certificate and key from the cluster's CA, as the kubelet's rotation leaves.
      const rotated = await node.ca.issueClientCert({
        commonName: `system:node:${node.nodeName}`,
        organizations: ["system:nodes"],
      });
      await replace(cert, rotated.certPem);
      await replace(key, rotated.keyPem);
      assert((await sources.apiServer.listNodePods(node.nodeName)).ok);
      await until("watched again", () => node.apiServer.requestsByVerb().watch >= before + 3);
      // The pass tells the objects it needs only when they change: the new client was not told.
      await until("by the new client alone", () => node.apiServer.watchesOpen() === 3 && watched());
      await until(
        "the objects known to the new client",
        () => refs.every((ref) => sources.apiServer.objectVersion?.(ref) !== undefined),
      );
    } finally {
      sources.close?.();
      sources.runtime.close();
    }
    await until("no watch left open", () => node.apiServer.watchesOpen() === 0);
  });
});
