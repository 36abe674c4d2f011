/**
 * `ckpt-agent run` (the daemon, also plain `ckpt-agent`), `ckpt-agent --once` (one pass, for
 * runbooks) and `ckpt-agent --once --dry-run` (observe and plan, write nothing).
 */
import { Agent } from "../pass/agent.ts";
import { trackedFromDisk } from "../pass/observe.ts";
import { type ListenAddress, parseListenAddress } from "../admin/listen.ts";
import { serveAdmin } from "../admin/server.ts";
import { commandOptions, commandOutput } from "../cli/commands.ts";
import { CommandError, EXIT_FAILURE, EXIT_LOCKED, EXIT_OK, UsageError } from "../cli/errors.ts";
import { loadConfig } from "../config/load.ts";
import { systemClock } from "../core/time.ts";
import { acquireLock, isLock, type Lock } from "../disk/lock.ts";
import { type Logger, stderrLogger } from "../util/log.ts";
import { Daemon } from "../daemon/daemon.ts";
import { type SystemdEnv, SystemdNotifier } from "../daemon/systemd.ts";
import { connectNode } from "../sources/node.ts";
import { AgentStores } from "../store/agent_stores.ts";
import { formatPassReport, formatPlan } from "./report.ts";

/** What systemd passes a service to notify it (lib/daemon/systemd.ts). */
function systemdEnv(): SystemdEnv {
  return {
    NOTIFY_SOCKET: Deno.env.get("NOTIFY_SOCKET"),
    WATCHDOG_USEC: Deno.env.get("WATCHDOG_USEC"),
    WATCHDOG_PID: Deno.env.get("WATCHDOG_PID"),
  };
}

/**
 * The daemon until SIGTERM or SIGINT; the pass under way always finishes, and the admin endpoint
 * stops after it. systemd, when it started the agent, is told how it goes.
 */
async function runDaemon(daemon: Daemon, adminListen: ListenAddress, log: Logger) {
  const stop = new AbortController();
  const systemd = SystemdNotifier.start({ daemon, env: systemdEnv(), pid: Deno.pid, log });
  const onSignal = () => {
    log.info("stopping after the current pass");
    systemd?.stopping();
    stop.abort();
  };
  const signals: Deno.Signal[] = ["SIGTERM", "SIGINT"];
  for (const signal of signals) Deno.addSignalListener(signal, onSignal);
  log.info("started", { node: daemon.config.nodeName, pollInterval: daemon.config.pollIntervalMs });
  const admin = await serveAdmin({ daemon, listen: adminListen, clock: systemClock, log });
  try {
    await daemon.loop(stop.signal);
  } finally {
    for (const signal of signals) Deno.removeSignalListener(signal, onSignal);
    systemd?.stopping();
    await admin?.close();
    await systemd?.close();
  }
  log.info("stopped");
}

/**
 * The single-agent lock, or a CommandError when another agent holds it. When no lock can be
 * taken at all (the lock file cannot be created, or someone other than root could hold or
 * change it), the agent goes on without one: activating during an outage matters more than the
 * guarantee, and a misplaced, read-only or tampered lock file must not be what keeps the control
 * plane down. A pid that cannot be written is only said.
 */
async function takeLock(path: string, log: Logger): Promise<Lock> {
  const lock = await acquireLock(path);
  if (!isLock(lock)) {
    const holder = lock.heldBy ? ` (pid ${lock.heldBy})` : "";
    throw new CommandError(`another ckpt-agent holds the lock ${path}${holder}`, EXIT_LOCKED);
  }
  if (!lock.held) {
    log.error("running without the single-agent lock: another agent could run at the same time", {
      lockFile: path,
      error: lock.problem,
    });
  } else if (lock.problem) {
    log.warn("lock held, but its file does not say by whom", {
      lockFile: path,
      error: lock.problem,
    });
  }
  return lock;
}

export async function runCommand(args: string[]): Promise<number> {
  const { config, extra } = await loadConfig(args, { extraFlags: commandOptions("run") });
  const output = commandOutput("run", extra);
  const once = extra.once === true;
  const dryRun = extra["dry-run"] === true;
  if (dryRun && !once) throw new UsageError("--dry-run: only with --once");
  const adminListen = once ? undefined : parseListenAddress(config.adminListen);
  const log = await stderrLogger(config);
  const sources = await connectNode(config, {
    log,
    // A daemon watches the API server; a single pass asks it.
    watch: !once,
    onReload: (files) =>
      log.info("kubeconfig or certificates changed: API server and kubelet clients rebuilt", {
        files,
      }),
  });
  const agent = new Agent({ config, sources, clock: systemClock, log });
  try {
    if (dryRun) {
      const report = await agent.plan(trackedFromDisk(config.stateDir));
      console.log(output === "json" ? JSON.stringify(report.plan) : formatPlan(report, true));
      return report.complete ? EXIT_OK : EXIT_FAILURE;
    }
    const lock = await takeLock(config.lockFile, log);
    try {
      const stores = await AgentStores.open(config.stateDir, log);
      if (adminListen) {
        const daemon = new Daemon({
          agent,
          stores,
          config,
          clock: systemClock,
          log,
          lockProblem: lock.problem,
        });
        await runDaemon(daemon, adminListen, log);
        return EXIT_OK;
      }
      const report = await agent.pass(stores);
      console.log(
        output === "json" ? JSON.stringify(report) : formatPassReport(report, config, lock),
      );
      return report.complete && lock.held ? EXIT_OK : EXIT_FAILURE;
    } finally {
      await lock.release();
    }
  } finally {
    sources.close?.();
    sources.runtime.close();
  }
}
