/**
 * A real containerd (Debian's 1.6, which CI installs with apt), started privately: its root,
 * state and sockets live in a temp dir. It can run pod sandboxes and containers without any
 * registry: the tests import a tiny image of their own (the host's `sleep` and the libraries it
 * needs) and name it as the sandbox image.
 */
import { join } from "node:path";
import type { RunningPod, RuntimeClient } from "../../lib/sources/cri.ts";
import type { SourceResult } from "../../lib/sources/types.ts";

/** How long containerd may take to serve CRI: 100 polls, 100 ms apart. */
const STARTUP_POLLS = 100;

/** The image every sandbox and container of the tests runs: `sleep infinity`. */
export const TEST_IMAGE = "localhost/ckpt-agent-test/sleep:1";

export interface Containerd {
  endpoint: string;
  /** containerd's log so far, for failure messages. */
  log(): string;
  /** Stops containerd with `signal` (SIGKILL: a crash; SIGTERM: an upgrade, a graceful stop)
   *  and starts it again on the same socket. */
  restart(signal: "SIGKILL" | "SIGTERM"): Promise<void>;
  /** Imports TEST_IMAGE, so that sandboxes and containers can run. */
  importTestImage(): Promise<void>;
}

export async function withContainerd(
  test: (containerd: Containerd) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "ctd-" });
  const socket = `${dir}/containerd.sock`;
  // Everything containerd would write under /var/lib, /run or /opt goes to the temp dir.
  await Deno.writeTextFile(
    `${dir}/config.toml`,
    [
      `version = 2`,
      `root = "${dir}/root"`,
      `state = "${dir}/state"`,
      `[grpc]`,
      `  address = "${socket}"`,
      `[ttrpc]`,
      `  address = "${socket}.ttrpc"`,
      `[plugins."io.containerd.internal.v1.opt"]`,
      `  path = "${dir}/opt"`,
      `[plugins."io.containerd.grpc.v1.cri"]`,
      `  stream_server_address = "127.0.0.1"`,
      `  stream_server_port = "0"`,
      `  sandbox_image = "${TEST_IMAGE}"`,
      // Where a process may not lower its OOM score (containers, VMs of CI providers), the
      // sandbox's -998 would fail every RunPodSandbox.
      `  restrict_oom_score_adj = true`,
    ].join("\n") + "\n",
  );
  let log = "";
  let running: { child: Deno.ChildProcess; logged: Promise<void> } | undefined;
  const start = () => {
    let child: Deno.ChildProcess;
    try {
      child = new Deno.Command("containerd", {
        args: ["--config", `${dir}/config.toml`],
        stdin: "null",
        stdout: "null",
        stderr: "piped",
      }).spawn();
    } catch (error) {
      throw new Error(
        `containerd is not installed (${error}); install it with "apt-get install containerd" ` +
          `(CI does): this test needs a real runtime`,
      );
    }
    const logged = child.stderr.pipeThrough(new TextDecoderStream()).pipeTo(
      new WritableStream({ write: (chunk) => void (log += chunk) }),
    );
    running = { child, logged };
  };
  const stop = async (signal: Deno.Signal) => {
    if (!running) return;
    try {
      running.child.kill(signal);
    } catch {
      // It has already exited; its log says why.
    }
    await running.child.status;
    await running.logged;
    running = undefined;
  };
  try {
    start();
    await test({
      endpoint: `unix://${socket}`,
      log: () => log,
      restart: async (signal) => {
        await stop(signal);
        start();
      },
      importTestImage: () => importTestImage(dir, socket),
    });
  } finally {
    await stop("SIGTERM");
    await Deno.remove(dir, { recursive: true });
  }
}

/** Polls until containerd serves CRI (it listens before its CRI plugin is initialised). */
export async function firstAnswer(client: RuntimeClient, containerd: Containerd) {
  let result: SourceResult<RunningPod[]> | undefined;
  for (let poll = 0; poll < STARTUP_POLLS; poll++) {
    result = await client.listRunningPods();
    if (result.ok) return result.value;
    if (result.failure.kind !== "unreachable" && result.failure.kind !== "server-error") break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(
    `containerd did not serve CRI: ${JSON.stringify(result)}\ncontainerd log:\n${containerd.log()}`,
  );
}

async function run(command: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(command, { args, stdin: "null" }).output();
  const text = new TextDecoder();
  if (!out.success) {
    throw new Error(`${command} ${args.join(" ")}: ${text.decode(out.stderr)}`);
  }
  return text.decode(out.stdout);
}

async function sha256(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** The files `sleep` needs at run time: itself, and what the dynamic loader loads. */
async function sleepFiles(): Promise<string[]> {
  const sleep = (await run("sh", ["-c", "command -v sleep"])).trim();
  const libraries = (await run("ldd", [sleep])).split(/\s+/).filter((w) => w.startsWith("/"));
  return [sleep, ...libraries];
}

const ARCHITECTURES: Record<string, string> = { x86_64: "amd64", aarch64: "arm64" };

/**
 * An OCI image layout of one layer, written as a tar and imported into containerd's k8s.io
 * namespace (the CRI's) with ctr, containerd's own client.
 */
async function importTestImage(dir: string, socket: string): Promise<void> {
  const image = join(dir, "image");
  const rootfs = join(image, "rootfs"), layout = join(image, "layout");
  const blobs = join(layout, "blobs", "sha256");
  await Deno.mkdir(blobs, { recursive: true });
  for (const file of await sleepFiles()) {
    await Deno.mkdir(join(rootfs, file, ".."), { recursive: true });
    await Deno.copyFile(file, join(rootfs, file));
  }
  await run("tar", ["--numeric-owner", "-cf", join(image, "layer.tar"), "-C", rootfs, "."]);
  const blob = async (bytes: Uint8Array, mediaType: string) => {
    const digest = await sha256(bytes);
    await Deno.writeFile(join(blobs, digest), bytes);
    return { mediaType, digest: `sha256:${digest}`, size: bytes.length };
  };
  const json = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));
  const layerBytes = await Deno.readFile(join(image, "layer.tar"));
  const layer = await blob(layerBytes, "application/vnd.oci.image.layer.v1.tar");
  const config = await blob(
    json({
      architecture: ARCHITECTURES[Deno.build.arch] ?? Deno.build.arch,
      os: "linux",
      config: { Entrypoint: [(await sleepFiles())[0], "infinity"] },
      rootfs: { type: "layers", diff_ids: [layer.digest] },
    }),
    "application/vnd.oci.image.config.v1+json",
  );
  const manifest = await blob(
    json({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config,
      layers: [layer],
    }),
    "application/vnd.oci.image.manifest.v1+json",
  );
  await Deno.writeTextFile(join(layout, "oci-layout"), '{"imageLayoutVersion":"1.0.0"}');
  await Deno.writeTextFile(
    join(layout, "index.json"),
    JSON.stringify({
      schemaVersion: 2,
      manifests: [{ ...manifest, annotations: { "io.containerd.image.name": TEST_IMAGE } }],
    }),
  );
  await run("tar", ["-cf", join(image, "image.tar"), "-C", layout, "."]);
  await run("ctr", [
    "--address",
    socket,
    "--namespace",
    "k8s.io",
    "images",
    "import",
    join(image, "image.tar"),
  ]);
}
