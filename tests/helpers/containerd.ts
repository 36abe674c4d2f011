/**
 * A real containerd (Debian's 1.6, which CI installs with apt), started privately for a test:
 * its root, state and sockets live in a temp dir, and it is stopped afterwards.
 */
import type { RuntimeClient } from "../../lib/sources/cri.ts";
import type { SourceResult } from "../../lib/sources/types.ts";

/** How long containerd may take to serve CRI: 100 polls, 100 ms apart. */
const STARTUP_POLLS = 100;

export interface Containerd {
  endpoint: string;
  /** containerd's log so far, for failure messages. */
  log(): string;
  /** Stops containerd with `signal` (SIGKILL: a crash; SIGTERM: an upgrade, a graceful stop)
   *  and starts it again on the same socket. */
  restart(signal: "SIGKILL" | "SIGTERM"): Promise<void>;
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
    });
  } finally {
    await stop("SIGTERM");
    await Deno.remove(dir, { recursive: true });
  }
}

/** Polls until containerd serves CRI (it listens before its CRI plugin is initialised). */
export async function firstAnswer(client: RuntimeClient, containerd: Containerd) {
  let result: SourceResult<unknown> | undefined;
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
