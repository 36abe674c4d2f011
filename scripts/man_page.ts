/**
 * ckpt-agent(8), the manual page: `deno run -A scripts/man_page.ts` writes docs/ckpt-agent.8,
 * which install.sh installs and the Debian package compresses; tests/packaging/man_page_test.ts
 * fails until the committed page is what this writes. The commands and their flags come from the
 * command table (lib/cli/commands.ts), the options, their defaults and the paths under FILES from
 * the settings table (lib/config/settings.ts), the exit statuses from lib/cli/errors.ts: what is
 * kept here is the prose around them, the environment and what each file is for.
 */
import { commandAbout } from "../lib/cli/help.ts";
import { commandFlags, type CommandName, COMMANDS, DEFAULT_COMMAND } from "../lib/cli/commands.ts";
import { EXIT_FAILURE, EXIT_LOCKED, EXIT_OK, EXIT_USAGE, SIGNAL_EXIT } from "../lib/cli/errors.ts";
import type { Flag } from "../lib/cli/flags.ts";
import {
  CONFIG_FILE_FLAG,
  defaultText,
  SETTING_KEYS,
  type SettingKey,
  SETTINGS,
} from "../lib/config/settings.ts";

export const MAN_PAGE = new URL("../docs/ckpt-agent.8", import.meta.url);

/** Text for roff: backslashes and hyphens escaped, `code` in bold, a leading dot made literal. */
export function roffText(text: string): string {
  return text.split("\n").map((line) => {
    const escaped = line.replaceAll("\\", "\\e").replaceAll("-", "\\-")
      .replace(/`([^`]+)`/g, "\\fB$1\\fR");
    return /^[.']/.test(escaped) ? `\\&${escaped}` : escaped;
  }).join("\n");
}

/** A tagged paragraph: the tag on its own line, the text indented below it. */
function entry(tag: string, text: string): string {
  return `.TP\n${tag}\n${roffText(text)}`;
}

function flagTag(flag: string, arg?: string, suffix = ""): string {
  return `\\fB\\-\\-${roffText(flag)}\\fR${arg ? ` \\fI${roffText(arg)}\\fR` : ""}${suffix}`;
}

function ownFlag(name: string, flag: Flag): string {
  const byDefault = flag.default === undefined ? "" : ` Default: ${flag.default}.`;
  return entry(flagTag(name, flag.arg), `${flag.help}.${byDefault}`);
}

const COMMAND_NAMES = Object.keys(COMMANDS) as CommandName[];

function synopsis(): string[] {
  return COMMAND_NAMES.map((name) => {
    const shown = name === DEFAULT_COMMAND ? `[${name}]` : name;
    return `.B ckpt\\-agent ${shown}\n${roffText(COMMANDS[name].synopsis)}\n.br`;
  });
}

function commands(): string[] {
  return COMMAND_NAMES.map((name) => {
    const flags = Object.entries(commandFlags(name) as Record<string, Flag>);
    const takes = COMMANDS[name].config ? " It takes the configuration: --config and OPTIONS." : "";
    const lines = [
      entry(`\\fB${name}\\fR ${roffText(COMMANDS[name].synopsis)}`, commandAbout(name) + takes),
    ];
    if (flags.length > 0) {
      lines.push(".RS", ...flags.map(([flag, spec]) => ownFlag(flag, spec)), ".RE");
    }
    return lines.join("\n");
  });
}

function options(): string[] {
  return [
    ownFlag(CONFIG_FILE_FLAG.flag, CONFIG_FILE_FLAG),
    ...SETTING_KEYS.map((key) => {
      const setting = SETTINGS[key];
      const { arg, repeatable } = setting.kind;
      return entry(
        flagTag(setting.flag, arg, repeatable ? " (repeatable)" : ""),
        `${setting.help}. Default: ${defaultText(setting)}. In the configuration file: \`${key}\`.`,
      );
    }),
  ];
}

/** A path a setting names by default, and what the file is for. */
function settingFile(key: SettingKey, what: string): [string, string] {
  return [String(SETTINGS[key].default), `${what} (\`${key}\`, --${SETTINGS[key].flag}).`];
}

function files(): string[] {
  const list: [string, string][] = [
    [
      CONFIG_FILE_FLAG.default,
      "The configuration (--config): every setting written out as a comment with its default. " +
      "A missing default file means the defaults; a missing file --config names is an error.",
    ],
    settingFile("kubeconfig", "The agent's credentials for the API server and the kubelet"),
    settingFile(
      "adminTokenFile",
      "The admin token, 0600 and root's: the bearer token the verbs send to the running agent",
    ),
    settingFile("staticPodDir", "The kubelet's static-pod directory, where checkpoints are active"),
    settingFile("inactiveDir", "Checkpoint manifests while their parents run"),
    settingFile("secretsDir", "The checkpoints' secrets, one directory per checkpoint"),
    settingFile("configmapsDir", "The checkpoints' configmaps, one directory per checkpoint"),
    settingFile("stateDir", "The agent's records: each checkpoint's state, versions, sandboxes"),
    settingFile(
      "lockFile",
      "The single-agent lock, with the holder's pid, in /run/ckpt-agent, the unit's runtime " +
        "directory, root's alone; also the place for an admin socket (adminListen unix:PATH)",
    ),
    settingFile("kubeletConfigFile", "The kubelet's configuration, read by doctor"),
    [
      "/usr/lib/systemd/system/ckpt-agent.service",
      "The systemd unit (the package's; install.sh installs it in /etc/systemd/system).",
    ],
    [
      "/usr/share/ckpt-agent/prometheus/ckpt-agent.rules.yml",
      "Prometheus alert rules, to copy to the Prometheus server (install.sh: under " +
      "/usr/local/share).",
    ],
  ];
  return list.map(([path, what]) => entry(`\\fI${roffText(path)}\\fR`, what));
}

/** Every variable the program reads, with what it does: tests/packaging/man_page_test.ts checks. */
export const ENVIRONMENT: readonly [names: string[], what: string][] = [
  [["NODE_NAME"], "The node's name when nodeName is not set (else the lowercased host name)."],
  [
    ["POD_NAME", "POD_NAMESPACE"],
    "Set (from the downward API) when the agent is deployed as a pod: its own pod, whose " +
    "checkpoint comes first.",
  ],
  [
    ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"],
    "The proxy for the API server and the kubelet, read as Go programs read them (the upper-case " +
    "name first); the kubeconfig's proxy-url wins, and a loopback address is never proxied.",
  ],
  [
    ["NO_PROXY", "no_proxy"],
    "Comma-separated hosts, domains, addresses and CIDR ranges reached without the proxy.",
  ],
  [["ALL_PROXY", "all_proxy"], "Not used, as in Go; hidden from the runtime's own HTTP client."],
  [["REQUEST_METHOD"], "When set (a CGI environment), HTTP_PROXY is ignored, as in Go."],
  [
    ["NOTIFY_SOCKET"],
    "Set by systemd for a Type=notify unit: the agent says READY=1 after its first pass, " +
    "STATUS= when a pass changes it, STOPPING=1, and pings the watchdog.",
  ],
  [
    ["WATCHDOG_USEC", "WATCHDOG_PID"],
    "The watchdog period (WatchdogSec=): the agent pings every third of it while its loop is " +
    "alive, and stops when a pass outruns the longest its peers' deadlines allow.",
  ],
  [
    ["JOURNAL_STREAM"],
    "Set by systemd when standard error is the journal: each log line then starts with its " +
    "syslog priority (<3> error to <7> debug), and logFormat auto writes text without the time.",
  ],
  [
    ["DENO_TLS_CA_STORE"],
    "Which roots verify a peer whose kubeconfig gives no CA: system (the default the agent sets " +
    "when it is unset: the system's store, or the file SSL_CERT_FILE names) or mozilla.",
  ],
  [["SYSTEMD_UNIT_PATH"], "Where doctor looks for the unit and its drop-ins, as systemd does."],
];

function environment(): string[] {
  return ENVIRONMENT.map(([names, what]) =>
    entry(names.map((name) => `\\fB${roffText(name)}\\fR`).join(", "), what)
  );
}

/** Every exit status, with what it means whatever the command; each command's entry says more. */
export function exitStatuses(): [number, string][] {
  const signals = Object.entries(SIGNAL_EXIT).map(([signal, status]) =>
    [status!, `demo: ended by ${signal}.`] as [number, string]
  );
  return [
    [EXIT_OK, "Done: a complete pass, nothing wrong found, the verb done or nothing to do."],
    [
      EXIT_FAILURE,
      "A pass degraded, a write failed, something not recorded or no lock taken; problems " +
      "found (verify), warnings (doctor); a verb refused or an unknown checkpoint. Also a bug: " +
      "the runtime's uncaught error, with its stack.",
    ],
    [
      EXIT_USAGE,
      "Bad input: the command line, the configuration (one line naming the setting, and the " +
      "file's line), a snapshot; errors found (doctor).",
    ],
    [
      EXIT_LOCKED,
      "Another agent holds the lock (--once), or holds it and its admin endpoint does not " +
      "answer (a verb).",
    ],
    ...signals,
  ];
}

function exitStatus(): string[] {
  return [
    roffText("Each command's entry under COMMANDS says what its statuses mean."),
    ...exitStatuses().map(([status, what]) => entry(`\\fB${status}\\fR`, what)),
  ];
}

export function manPage(version: string): string {
  return [
    `.TH CKPT\\-AGENT 8 "" "ckpt\\-agent ${roffText(version)}" "System Administration"`,
    ".SH NAME",
    "ckpt\\-agent \\- keeps checkpoints of control\\-plane pods and runs them when the control " +
    "plane is gone",
    ".SH SYNOPSIS",
    ...synopsis(),
    ".SH DESCRIPTION",
    roffText(
      "ckpt-agent runs on the control-plane nodes of a self-hosted Kubernetes cluster (one whose " +
        "control-plane pods the cluster itself runs) as the systemd unit ckpt-agent.service, " +
        "outside Kubernetes. It keeps sanitized copies (checkpoints) of critical pods, with " +
        "their secrets and configmaps, on disk. When such a pod is not running and the API " +
        "server cannot vouch for it, the agent hands the copy to the kubelet as a static pod; " +
        "when the original is back, it withdraws the copy.",
    ),
    ".PP",
    roffText(
      `Settings come from built-in defaults, then the YAML file (${CONFIG_FILE_FLAG.default}), ` +
        "then the flags under OPTIONS; `ckpt-agent config` prints the result. " +
        "`ckpt-agent help COMMAND` prints a command's flags.",
    ),
    ".SH COMMANDS",
    ...commands(),
    ".SH OPTIONS",
    ...options(),
    ".SH FILES",
    ...files(),
    ".SH ENVIRONMENT",
    ...environment(),
    ".SH EXIT STATUS",
    ...exitStatus(),
    ".SH SEE ALSO",
    ".BR systemctl (1),",
    ".BR journalctl (1),",
    ".BR kubelet (8),",
    ".BR crictl (1).",
    ".PP",
    roffText(
      "The README (/usr/share/doc/ckpt-agent/README.md.gz): installing, the configuration, the " +
        "runbook, the admin endpoint, the alert rules.",
    ),
    "",
  ].join("\n");
}

if (import.meta.main) {
  const { version } = JSON.parse(
    await Deno.readTextFile(new URL("../deno.json", import.meta.url)),
  );
  await Deno.writeTextFile(MAN_PAGE, manPage(version));
}
