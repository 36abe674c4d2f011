/** The CRI client against the simulated runtime: a real gRPC server on a real unix socket. */
import { deepStrictEqual as assertEquals } from "node:assert/strict";
import {
  connectRuntime,
  type ContainerEntry,
  parseSandboxInfo,
  runningPods,
  type RuntimeClient,
} from "../../lib/sources/cri.ts";
import { type CriSimOptions, CriSimServer, type SimPod } from "../../lib/sim/cri_server.ts";
import type { CriApiVersion } from "../../lib/sources/cri_proto.ts";
import type { SourceResult } from "../../lib/sources/types.ts";
import { grpcAnswer, startH2cServer } from "../../lib/sim/h2c_server.ts";
import { withTempDir } from "../helpers/temp_dir.ts";

const TIMEOUT_MS = 5_000;

interface Runtime {
  sim: CriSimServer;
  client: RuntimeClient;
  socketPath: string;
}

/** A sim on a socket in a fresh temp dir, and a client of it; both gone afterwards. */
async function withRuntime(
  pods: SimPod[],
  test: (runtime: Runtime) => Promise<void>,
  options: { apiVersions?: readonly CriApiVersion[]; timeoutMs?: number } = {},
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "cri-" });
  const socketPath = `${dir}/runtime.sock`;
  const simOptions: CriSimOptions = { socketPath, apiVersions: options.apiVersions };
  const sim = await CriSimServer.start(simOptions);
  const client = connectRuntime(sim.endpoint, options.timeoutMs ?? TIMEOUT_MS);
  try {
    sim.setPods(pods);
    await test({ sim, client, socketPath });
  } finally {
    client.close();
    await sim.close();
    await Deno.remove(dir, { recursive: true });
  }
}

function value<T>(result: SourceResult<T>): T {
  if (!result.ok) throw new Error(`expected success, got ${JSON.stringify(result.failure)}`);
  return result.value;
}

function failureOf<T>(result: SourceResult<T>): { kind: string; source: string } {
  if (result.ok) throw new Error(`expected a failure, got ${JSON.stringify(result.value)}`);
  return { kind: result.failure.kind, source: result.failure.source };
}

/** A sandbox of a running pod: ready, with its container running. */
function pod(id: string, fields: Partial<SimPod> = {}): SimPod {
  const [namespace, name] = id.split("/");
  return {
    namespace,
    name,
    uid: `uid-${name}`,
    ready: true,
    containers: [{ name: "main", state: "running" }],
    ...fields,
  };
}

/** A container of one pod, in a sandbox, in a state, at a restart attempt. */
function entry(sandboxId: string, state: string | number, attempt = 0): ContainerEntry {
  const labels = {
    "io.kubernetes.pod.namespace": "kube-system",
    "io.kubernetes.pod.name": "p",
    "io.kubernetes.pod.uid": "uid-p",
  };
  return { sandboxId, state, attempt, labels };
}

Deno.test("the running rule: a running container anywhere, or a created or exited one in a ready sandbox", () => {
  const table: [string, ContainerEntry[], string[][]][] = [
    ["no containers (a ready sandbox alone)", [], []],
    ["running in a ready sandbox", [entry("ready", "CONTAINER_RUNNING")], [["ready"]]],
    ["running in a sandbox not ready", [entry("old", "CONTAINER_RUNNING")], [["old"]]],
    ["created in a ready sandbox", [entry("ready", "CONTAINER_CREATED")], [["ready"]]],
    ["exited in a ready sandbox (its port taken)", [entry("ready", "CONTAINER_EXITED")], [[
      "ready",
    ]]],
    ["exited in a sandbox not ready (after a power cut)", [entry("old", "CONTAINER_EXITED")], []],
    ["created in a sandbox not ready", [entry("old", "CONTAINER_CREATED")], []],
    ["unknown states, even in a ready sandbox", [
      entry("ready", "CONTAINER_UNKNOWN"),
      entry("ready", 7),
    ], []],
    ["an old exited sandbox and a new one: only the new one is named", [
      entry("old", "CONTAINER_EXITED"),
      entry("ready", "CONTAINER_RUNNING"),
      entry("ready", "CONTAINER_EXITED"),
    ], [["ready"]]],
  ];
  for (const [label, containers, want] of table) {
    assertEquals(runningPods(new Set(["ready"]), containers).map((p) => p.sandboxIds), want, label);
  }
});

Deno.test("a running pod's restarts: the highest attempt among the containers that make it count", () => {
  const restarts = (containers: ContainerEntry[]) =>
    runningPods(new Set(["ready"]), containers).map((p) => p.restarts);
  assertEquals(restarts([entry("ready", "CONTAINER_RUNNING")]), [0]);
  const running = (containers: ContainerEntry[]) =>
    runningPods(new Set(["ready"]), containers).map((p) => p.containerRunning);
  assertEquals(running([entry("ready", "CONTAINER_RUNNING"), entry("ready", "CONTAINER_EXITED")]), [
    true,
  ]);
  assertEquals(running([entry("ready", "CONTAINER_EXITED", 2)]), [false]);
  assertEquals(
    restarts([
      entry("ready", "CONTAINER_EXITED", 3),
      entry("ready", "CONTAINER_EXITED", 2),
      // An old sandbox's container does not make the pod count, nor its attempt.
      entry("old", "CONTAINER_EXITED", 7),
    ]),
    [3],
  );
});

Deno.test("running pods over CRI: the rule on every state, grouped by the containers' pod labels", async () => {
  const pods = [
    pod("kube-system/ready-sandbox", { containers: [] }),
    pod("kube-system/running-container", {
      ready: false,
      containers: [{ name: "main", state: "running" }],
    }),
    pod("kube-system/stopped", { ready: false, containers: [{ name: "main", state: "exited" }] }),
    pod("kube-system/created", { containers: [{ name: "main", state: "created" }] }),
    pod("kube-system/port-in-use", {
      containers: [{ name: "main", state: "exited" }, {
        name: "main",
        state: "exited",
        attempt: 1,
      }],
    }),
    pod("default/no-labels", { labels: {} }),
    pod("default/no-uid-label", {
      labels: { "io.kubernetes.pod.namespace": "default", "io.kubernetes.pod.name": "x" },
    }),
    // A pod whose old sandbox stopped while a new one is ready: both are its sandboxes when their
    // containers count.
    pod("kube-system/restarted", {
      sandboxId: "old",
      ready: false,
      containers: [{ name: "a", state: "exited" }],
    }),
    pod("kube-system/restarted", {
      sandboxId: "new",
      containers: [{ name: "a", state: "running" }, { name: "b", state: "created" }],
    }),
    pod("kube-system/restarted", {
      sandboxId: "older",
      ready: false,
      containers: [{ name: "a", state: "running" }],
    }),
  ];
  await withRuntime(pods, async ({ client }) => {
    assertEquals(value(await client.listRunningPods()), [
      {
        namespace: "kube-system",
        name: "created",
        uid: "uid-created",
        sandboxIds: ["sandbox-uid-created"],
        restarts: 0,
        containerRunning: false,
      },
      {
        namespace: "kube-system",
        name: "port-in-use",
        uid: "uid-port-in-use",
        sandboxIds: ["sandbox-uid-port-in-use"],
        // Its container restarted once: the attempt the kubelet made it at.
        restarts: 1,
        containerRunning: false,
      },
      {
        namespace: "kube-system",
        name: "restarted",
        uid: "uid-restarted",
        sandboxIds: ["new", "older"],
        restarts: 0,
        containerRunning: true,
      },
      {
        namespace: "kube-system",
        name: "running-container",
        uid: "uid-running-container",
        sandboxIds: ["sandbox-uid-running-container"],
        restarts: 0,
        containerRunning: true,
      },
    ]);
  });
});

Deno.test("running pods over CRI: v1alpha2 names the states alike", async () => {
  const pods = [
    pod("kube-system/created", { containers: [{ name: "main", state: "created" }] }),
    pod("kube-system/exited", { containers: [{ name: "main", state: "exited" }] }),
    pod("kube-system/stale", { ready: false, containers: [{ name: "main", state: "exited" }] }),
  ];
  await withRuntime(pods, async ({ sim, client }) => {
    assertEquals(value(await client.listRunningPods()).map((p) => p.name), ["created", "exited"]);
    assertEquals(sim.calls().filter((c) => c.includes("v1alpha2")).length, 3);
  }, { apiVersions: ["v1alpha2"] });
});

Deno.test("running pods: two uids of one namespace/name are two pods", async () => {
  const pods = [
    pod("kube-system/etcd", { uid: "b" }),
    pod("kube-system/etcd", { uid: "a" }),
  ];
  await withRuntime(pods, async ({ client }) => {
    assertEquals(
      value(await client.listRunningPods()).map((p) => [p.name, p.uid, p.sandboxIds]),
      [["etcd", "a", ["sandbox-a"]], ["etcd", "b", ["sandbox-b"]]],
    );
  });
});

Deno.test("running pods: an empty runtime answers an empty list", async () => {
  await withRuntime([], async ({ client }) => {
    assertEquals(value(await client.listRunningPods()), []);
  });
});

Deno.test("sandbox status: netns, ips, CIDR interfaces v4 and v6, port mappings", async () => {
  const pods = [pod("kube-system/dns", {
    uid: "u-dns",
    sandboxId: "sb-dns",
    network: {
      netnsPath: "/var/run/netns/cni-1234",
      ips: ["10.88.0.5", "fd00::5"],
      interfaces: [
        { name: "eth0", addresses: ["10.88.0.5", "fd00::5"] },
        { name: "net1", addresses: ["192.168.7.2/24", "fd01::2/64"] },
      ],
    },
    portMappings: [
      { protocol: "tcp", containerPort: 53, hostPort: 5353 },
      { protocol: "udp", containerPort: 53, hostPort: 5353 },
      { protocol: "sctp", containerPort: 9000, hostPort: 0 },
    ],
  })];
  await withRuntime(pods, async ({ client }) => {
    assertEquals(value(await client.sandboxStatus("sb-dns")), {
      id: "sb-dns",
      namespace: "kube-system",
      name: "dns",
      uid: "u-dns",
      netnsPath: "/var/run/netns/cni-1234",
      ips: ["10.88.0.5", "fd00::5"],
      interfaces: [
        { name: "eth0", address: "10.88.0.5/32" },
        { name: "eth0", address: "fd00::5/128" },
        { name: "net1", address: "192.168.7.2/24" },
        { name: "net1", address: "fd01::2/64" },
      ],
      portMappings: [
        { protocol: "tcp", containerPort: 53, hostPort: 5353 },
        { protocol: "udp", containerPort: 53, hostPort: 5353 },
        { protocol: "sctp", containerPort: 9000, hostPort: 0 },
      ],
    });
  });
});

Deno.test("sandbox status: a host-network sandbox has no netns, ips or interfaces", async () => {
  const pods = [pod("kube-system/kube-apiserver", {
    sandboxId: "sb-api",
    portMappings: [{ protocol: "tcp", containerPort: 6443, hostPort: 6443 }],
  })];
  await withRuntime(pods, async ({ client }) => {
    assertEquals(value(await client.sandboxStatus("sb-api")), {
      id: "sb-api",
      namespace: "kube-system",
      name: "kube-apiserver",
      uid: "uid-kube-apiserver",
      netnsPath: "",
      ips: [],
      interfaces: [],
      portMappings: [{ protocol: "tcp", containerPort: 6443, hostPort: 6443 }],
    });
  });
});

Deno.test("sandbox status: an unknown sandbox is not-found", async () => {
  await withRuntime([], async ({ client }) => {
    assertEquals(failureOf(await client.sandboxStatus("nope")), {
      source: "runtime",
      kind: "not-found",
    });
  });
});

Deno.test("version: v1 is used when the runtime has it, and probed only once", async () => {
  await withRuntime([pod("kube-system/etcd")], async ({ sim, client }) => {
    value(await client.listRunningPods());
    value(await client.sandboxStatus("sandbox-uid-etcd"));
    assertEquals(sim.calls().sort(), [
      "/runtime.v1.RuntimeService/ListContainers",
      "/runtime.v1.RuntimeService/ListPodSandbox",
      "/runtime.v1.RuntimeService/PodSandboxStatus",
      "/runtime.v1.RuntimeService/Version",
    ]);
  });
});

Deno.test("version: falls back to v1alpha2 when v1 is unimplemented", async () => {
  const pods = [pod("kube-system/etcd", { network: { netnsPath: "/n", ips: [], interfaces: [] } })];
  await withRuntime(pods, async ({ sim, client }) => {
    assertEquals(value(await client.listRunningPods()).map((p) => p.name), ["etcd"]);
    assertEquals(value(await client.sandboxStatus("sandbox-uid-etcd")).netnsPath, "/n");
    assertEquals(sim.calls().sort(), [
      "/runtime.v1alpha2.RuntimeService/ListContainers",
      "/runtime.v1alpha2.RuntimeService/ListPodSandbox",
      "/runtime.v1alpha2.RuntimeService/PodSandboxStatus",
      "/runtime.v1alpha2.RuntimeService/Version",
    ]);
  }, { apiVersions: ["v1alpha2"] });
});

Deno.test("version: a runtime with neither API is a bad response", async () => {
  await withRuntime([], async ({ client }) => {
    assertEquals(failureOf(await client.listRunningPods()), {
      source: "runtime",
      kind: "bad-response",
    });
  }, { apiVersions: [] });
});

Deno.test("unreachable: no socket at the endpoint, given as a URL or a bare path", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cri-" });
  try {
    for (const endpoint of [`unix://${dir}/missing.sock`, `${dir}/missing.sock`]) {
      const client = connectRuntime(endpoint, TIMEOUT_MS);
      try {
        assertEquals(failureOf(await client.listRunningPods()), {
          source: "runtime",
          kind: "unreachable",
        });
        assertEquals(failureOf(await client.sandboxStatus("x")).kind, "unreachable");
      } finally {
        client.close();
      }
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("unreachable: an endpoint that is not a unix socket", async () => {
  for (const endpoint of ["tcp://127.0.0.1:1234", "run/containerd.sock", "unix://relative"]) {
    const client = connectRuntime(endpoint, TIMEOUT_MS);
    const result = await client.listRunningPods();
    client.close();
    assertEquals(failureOf(result).kind, "unreachable", endpoint);
  }
});

Deno.test("unreachable: a runtime that went away, then answers again when it is back", async () => {
  await withRuntime([pod("kube-system/etcd")], async ({ sim, client, socketPath }) => {
    value(await client.listRunningPods());
    await sim.close();
    assertEquals(failureOf(await client.listRunningPods()).kind, "unreachable");
    const again = await CriSimServer.start({ socketPath });
    try {
      again.setPods([pod("kube-system/etcd")]);
      assertEquals(value(await client.listRunningPods()).map((p) => p.name), ["etcd"]);
    } finally {
      await again.close();
    }
  });
});

Deno.test("a runtime restarted between two passes costs no failed pass", async () => {
  await withRuntime([pod("kube-system/etcd")], async ({ sim, client, socketPath }) => {
    value(await client.listRunningPods());
    await sim.close();
    const again = await CriSimServer.start({ socketPath });
    try {
      again.setPods([pod("kube-system/etcd")]);
      assertEquals(value(await client.listRunningPods()).map((p) => p.name), ["etcd"]);
      assertEquals(value(await client.sandboxStatus("sandbox-uid-etcd")).name, "etcd");
    } finally {
      await again.close();
    }
  });
});

Deno.test("a call the runtime breaks off is asked again on a fresh connection", async () => {
  await withTempDir(async (dir) => {
    let calls = 0;
    const server = await startH2cServer(`${dir}/runtime.sock`, () => {
      // The second pass's first call: the answer starts, then the stream is reset.
      if (++calls === 4) {
        return new Response(
          new ReadableStream({ pull: (c) => c.error(new Error("the runtime went away")) }),
          { headers: { "content-type": "application/grpc" } },
        );
      }
      // Every RuntimeService answer decodes from an empty message: a version, or empty lists.
      return grpcAnswer(new Uint8Array());
    });
    const client = connectRuntime(server.socketPath, TIMEOUT_MS);
    try {
      for (let pass = 1; pass <= 3; pass++) {
        assertEquals(value(await client.listRunningPods()), [], `pass ${pass}`);
      }
      // Three calls for the first pass, two for each other, and the one asked again.
      assertEquals(calls, 8);
    } finally {
      client.close();
      await server.close();
    }
  });
});

Deno.test("timeout: a runtime that never answers fails at the deadline", async () => {
  await withRuntime([], async ({ sim, client }) => {
    value(await client.listRunningPods());
    sim.withholdAnswers();
    assertEquals(failureOf(await client.listRunningPods()), { source: "runtime", kind: "timeout" });
    assertEquals(failureOf(await client.sandboxStatus("x")).kind, "timeout");
  }, { timeoutMs: 200 });
});

Deno.test("timeout: the version probe has a deadline too", async () => {
  await withRuntime([], async ({ sim, client }) => {
    sim.withholdAnswers();
    assertEquals(failureOf(await client.listRunningPods()).kind, "timeout");
  }, { timeoutMs: 200 });
});

Deno.test("sandbox info: containerd 1.6 verbose info as crictl inspectp shows it", () => {
  const info = JSON.stringify({
    pid: 2514,
    processStatus: "running",
    netNamespaceClosed: false,
    image: "registry.k8s.io/pause:3.6",
    runtimeHandler: "",
    runtimeType: "io.containerd.runc.v2",
    config: {
      metadata: { name: "coredns-abc", uid: "u1", namespace: "kube-system" },
      hostname: "coredns-abc",
      log_directory: "/var/log/pods/kube-system_coredns-abc_u1",
      dns_config: { servers: ["10.96.0.10"] },
      port_mappings: [
        { protocol: 1, container_port: 53 },
        { container_port: 53 },
        { protocol: 1, container_port: 9153, host_port: 9153 },
        { protocol: 7, container_port: 1 },
      ],
      labels: { "io.kubernetes.pod.name": "coredns-abc" },
      linux: { cgroup_parent: "/kubepods", security_context: { namespace_options: { pid: 1 } } },
    },
    runtimeSpec: {
      ociVersion: "1.0.2-dev",
      linux: {
        namespaces: [
          { type: "pid" },
          { type: "ipc" },
          { type: "uts" },
          { type: "mount" },
          { type: "network", path: "/var/run/netns/cni-5c9fe7a0-05e5-3e6c-1a1e-0e5a6e3ad6b1" },
        ],
      },
    },
    cniResult: {
      Interfaces: {
        cni0: { IPConfigs: null, Mac: "36:1b:6d:2d:9e:3f", Sandbox: "" },
        eth0: {
          IPConfigs: [{ IP: "10.244.0.3", Gateway: "10.244.0.1" }],
          Mac: "b2:0e:5f:b1:7e:2a",
          Sandbox: "/var/run/netns/cni-5c9fe7a0-05e5-3e6c-1a1e-0e5a6e3ad6b1",
        },
        lo: {
          IPConfigs: [{ IP: "127.0.0.1", Gateway: "" }, { IP: "::1", Gateway: "" }],
          Mac: "00:00:00:00:00:00",
          Sandbox: "/var/run/netns/cni-5c9fe7a0-05e5-3e6c-1a1e-0e5a6e3ad6b1",
        },
        veth9f1c6b2e: { IPConfigs: null, Mac: "5e:2a:18:4f:0d:77", Sandbox: "" },
      },
      DNS: [{}, {}],
      Routes: [{ dst: "0.0.0.0/0", gw: "10.244.0.1" }],
    },
  });
  assertEquals(parseSandboxInfo(info), {
    netnsPath: "/var/run/netns/cni-5c9fe7a0-05e5-3e6c-1a1e-0e5a6e3ad6b1",
    interfaces: [{ name: "eth0", address: "10.244.0.3/32" }],
    portMappings: [
      { protocol: "udp", containerPort: 53, hostPort: 0 },
      { protocol: "tcp", containerPort: 53, hostPort: 0 },
      { protocol: "udp", containerPort: 9153, hostPort: 9153 },
    ],
  });
});

Deno.test("sandbox info: absent or odd parts read as empty, each on its own", () => {
  const empty = { netnsPath: "", interfaces: [], portMappings: [] };
  for (const info of [undefined, "", "not json", "null", "[]", "{}", '{"runtimeSpec": 5}']) {
    assertEquals(parseSandboxInfo(info), empty, String(info));
  }
  assertEquals(
    parseSandboxInfo(JSON.stringify({
      runtimeSpec: { linux: { namespaces: [{ type: "network", path: "/n" }] } },
      config: { port_mappings: "nope" },
      cniResult: {
        Interfaces: { eth0: { IPConfigs: [{ IP: "not-an-ip" }, { IP: "10.0.0.1/33" }] } },
      },
    })),
    { ...empty, netnsPath: "/n" },
  );
  assertEquals(
    parseSandboxInfo(JSON.stringify({
      config: { port_mappings: [{ protocol: "SCTP", container_port: 1, host_port: 2 }] },
      cniResult: null,
    })),
    { ...empty, portMappings: [{ protocol: "sctp", containerPort: 1, hostPort: 2 }] },
  );
});

Deno.test("running pods: the same answer again is the same pods; a change, and a change back, are seen", async () => {
  const etcd = pod("kube-system/etcd"), apiserver = pod("kube-system/kube-apiserver");
  await withRuntime([etcd, apiserver], async ({ sim, client }) => {
    const names = async () => value(await client.listRunningPods()).map((p) => p.name);
    assertEquals(await names(), ["etcd", "kube-apiserver"]);
    assertEquals(await names(), ["etcd", "kube-apiserver"]);
    sim.setPods([etcd]);
    assertEquals(await names(), ["etcd"]);
    sim.setPods([etcd, apiserver]);
    assertEquals(await names(), ["etcd", "kube-apiserver"]);
  });
});
