/**
 * ckpt-agent(8), the manual page the Debian package installs, written from the same help text the
 * binary prints (lib/cli/help.ts): the commands, then the daemon's flags and settings, each set
 * as printed. Nothing in it is kept by hand but the few lines of prose around them.
 */
import { commandHelp, overview } from "../lib/cli/help.ts";
import { CONFIG_FILE_FLAG } from "../lib/config/settings.ts";

/** Text for roff: backslashes and hyphens escaped, a leading dot or quote made literal. */
export function roffText(text: string): string {
  return text.split("\n").map((line) => {
    const escaped = line.replaceAll("\\", "\\e").replaceAll("-", "\\-");
    return /^[.']/.test(escaped) ? `\\&${escaped}` : escaped;
  }).join("\n");
}

/** Lines shown exactly as they are (the help text is laid out for a 100-column terminal). */
function verbatim(text: string): string {
  return `.nf\n${roffText(text)}\n.fi`;
}

export function manPage(version: string): string {
  return [
    `.TH CKPT\\-AGENT 8 "" "ckpt\\-agent ${roffText(version)}" "System Administration"`,
    ".SH NAME",
    "ckpt\\-agent \\- keeps checkpoints of control\\-plane pods and runs them when the control " +
    "plane is gone",
    ".SH SYNOPSIS",
    ".B ckpt\\-agent",
    "[\\fICOMMAND\\fR] [\\fIflags\\fR]",
    ".SH DESCRIPTION",
    roffText(
      "ckpt-agent runs on Kubernetes control-plane nodes as the systemd unit ckpt-agent.service, " +
        "outside Kubernetes. It keeps sanitized copies (checkpoints) of critical pods, with their " +
        "secrets and configmaps, on disk. When such a pod is not running and the API server " +
        "cannot vouch for it, the agent hands the copy to the kubelet as a static pod; when the " +
        "original is back, it withdraws the copy.",
    ),
    ".PP",
    roffText(
      `Its settings come from ${CONFIG_FILE_FLAG.default}, where each is written out as a ` +
        "comment with its default, and from the flags below.",
    ),
    ".SH COMMANDS",
    verbatim(overview()),
    ".SH THE DAEMON",
    verbatim(commandHelp("run")),
    ".SH SEE ALSO",
    roffText(
      "ckpt-agent help COMMAND, for each command's flags. The README " +
        "(/usr/share/doc/ckpt-agent/README.md.gz): installing, the configuration, the runbook, " +
        "the admin endpoint, the alert rules.",
    ),
    "",
  ].join("\n");
}
