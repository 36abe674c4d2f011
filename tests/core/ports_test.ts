/** Declared host ports (with the hostNetwork default) and dropping port declarations, as tables. */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import type { Pod } from "../../lib/core/pod.ts";
import { declaredHostPorts, dropPortDeclarations } from "../../lib/core/ports.ts";

function pod(spec: Record<string, unknown>): Pod {
  return { metadata: { name: "p", namespace: "ns" }, spec };
}

Deno.test("declared host ports: hostPort anywhere; every port of a hostNetwork pod", () => {
  const https = { name: "https", containerPort: 6443 };
  const table: [string, Record<string, unknown>, unknown[]][] = [
    ["no ports", { containers: [{ name: "a" }] }, []],
    ["container port only, pod network", { containers: [{ name: "a", ports: [https] }] }, []],
    [
      "hostPort on the pod network",
      {
        containers: [{
          name: "a",
          ports: [{ containerPort: 8443, hostPort: 10259, protocol: "TCP", hostIP: "10.0.0.11" }],
        }],
      },
      [{
        list: "containers",
        container: "a",
        protocol: "TCP",
        hostIP: "10.0.0.11",
        hostPort: 10259,
        containerPort: 8443,
      }],
    ],
    [
      "hostNetwork: containerPort becomes the host port, in init containers too",
      {
        hostNetwork: true,
        initContainers: [{ name: "i", ports: [{ containerPort: 9000, protocol: "UDP" }] }],
        containers: [{ name: "a", ports: [https, { containerPort: 8080, hostPort: 18080 }] }],
      },
      [
        {
          list: "initContainers",
          container: "i",
          protocol: "UDP",
          hostIP: "",
          hostPort: 9000,
          containerPort: 9000,
        },
        {
          list: "containers",
          container: "a",
          protocol: "",
          hostIP: "",
          hostPort: 6443,
          containerPort: 6443,
        },
        {
          list: "containers",
          container: "a",
          protocol: "",
          hostIP: "",
          hostPort: 18080,
          containerPort: 8080,
        },
      ],
    ],
    [
      "ephemeral containers are not defaulted; a hostPort of theirs still counts",
      {
        hostNetwork: true,
        ephemeralContainers: [{
          name: "debug",
          ports: [{ containerPort: 7000 }, { containerPort: 7001, hostPort: 7001 }],
        }],
      },
      [{
        list: "ephemeralContainers",
        container: "debug",
        protocol: "",
        hostIP: "",
        hostPort: 7001,
        containerPort: 7001,
      }],
    ],
    [
      "junk is not a port",
      { hostNetwork: true, containers: [{ name: "a", ports: [{ containerPort: "x" }, 5, null] }] },
      [],
    ],
  ];
  for (const [label, spec, want] of table) assertEquals(declaredHostPorts(pod(spec)), want, label);
});

Deno.test("declared host ports of some container lists only (the kubelet's admission reads containers)", () => {
  const spec = {
    hostNetwork: true,
    initContainers: [{ name: "i", ports: [{ containerPort: 9000 }] }],
    containers: [{ name: "a", ports: [{ containerPort: 6443 }] }],
  };
  assertEquals(declaredHostPorts(pod(spec), ["containers"]).map((p) => p.hostPort), [6443]);
});

Deno.test("dropping ports: named probe and lifecycle ports get the container's own numbers", () => {
  const spec = {
    hostNetwork: true,
    initContainers: [{
      name: "init",
      ports: [{ name: "metrics", containerPort: 9100 }],
      startupProbe: { tcpSocket: { port: "metrics" } },
    }],
    containers: [{
      name: "apiserver",
      ports: [
        { name: "https", containerPort: 6443, hostPort: 6443 },
        { name: "metrics", containerPort: 8080 },
      ],
      livenessProbe: { httpGet: { path: "/livez", port: "https", scheme: "HTTPS" } },
      readinessProbe: { httpGet: { path: "/readyz", port: 6443 } },
      startupProbe: { grpc: { port: 9000 } },
      lifecycle: {
        postStart: { tcpSocket: { port: "metrics" } },
        preStop: { httpGet: { path: "/drain", port: "admin" } },
      },
    }, {
      // The same name in another container: each resolves within its own ports.
      name: "sidecar",
      ports: [{ name: "https", containerPort: 8443 }],
      readinessProbe: { tcpSocket: { port: "https" } },
      livenessProbe: { exec: { command: ["true"] } },
    }],
    ephemeralContainers: [{ name: "debug", ports: [{ containerPort: 7000 }] }],
  };
  const warnings = dropPortDeclarations(spec);
  assertEquals(spec, {
    hostNetwork: true,
    initContainers: [{ name: "init", startupProbe: { tcpSocket: { port: 9100 } } }],
    containers: [{
      name: "apiserver",
      livenessProbe: { httpGet: { path: "/livez", port: 6443, scheme: "HTTPS" } },
      readinessProbe: { httpGet: { path: "/readyz", port: 6443 } },
      startupProbe: { grpc: { port: 9000 } },
      lifecycle: {
        postStart: { tcpSocket: { port: 8080 } },
        preStop: { httpGet: { path: "/drain", port: "admin" } },
      },
    }, {
      name: "sidecar",
      readinessProbe: { tcpSocket: { port: 8443 } },
      livenessProbe: { exec: { command: ["true"] } },
    }],
    ephemeralContainers: [{ name: "debug" }],
  });
  assertEquals(warnings, [
    "container apiserver: lifecycle.preStop httpGet port admin names no port the container " +
    "declares; left as it is",
  ]);
  assertEquals(declaredHostPorts(pod(spec)), []);
});

Deno.test("dropping ports from a spec without containers changes nothing", () => {
  const spec = { volumes: [] };
  assertEquals(dropPortDeclarations(spec), []);
  assertEquals(spec, { volumes: [] });
});
