#!/usr/bin/env bash
# Installs ckpt-agent (binary, systemd unit, default configuration, directories) on this node, or
# stages it into a directory for packagers; also uninstalls. Run with --help for the details.
set -euo pipefail

readonly NAME=ckpt-agent
# Read from standard input (as the Debian package's postrm runs it), the script has no directory
# of its own; --uninstall needs none.
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]:-.}")" && pwd)"
readonly SCRIPT_DIR

# The binary the shipped unit's ExecStart runs.
readonly UNIT_EXEC=/usr/local/bin/ckpt-agent
# This node's layout; --package stages the Debian package's instead (below).
BIN=$UNIT_EXEC
UNIT=/etc/systemd/system/ckpt-agent.service
# Shipped data: the Prometheus alert rules, for operators to copy to their Prometheus.
SHARE_DIR=/usr/local/share/ckpt-agent
readonly RULES_FILE=prometheus/ckpt-agent.rules.yml
# The manual page (scripts/man_page.ts writes it); the package compresses it.
MAN_PAGE=/usr/local/share/man/man8/ckpt-agent.8
# Drop-ins (`systemctl edit ckpt-agent`): the operator's, removed only by purge.
readonly UNIT_DROP_INS=/etc/systemd/system/ckpt-agent.service.d
readonly CONFIG_DIR=/etc/ckpt-agent
readonly CONFIG=/etc/ckpt-agent/config.yaml
# The admin token the unit and the verbs use by default (adminTokenFile in lib/config/settings.ts):
# made on each node, never shipped in a package, never replaced.
readonly ADMIN_TOKEN=/etc/ckpt-agent/admin-token
readonly STATE_DIR=/var/lib/ckpt-agent
readonly KUBE_DIR=/etc/kubernetes
readonly MANIFESTS_DIR=/etc/kubernetes/manifests
# The directories that hold nothing but checkpoints: ours, 0700 (they hold secrets).
readonly CHECKPOINT_DIRS=(
  /etc/kubernetes/inactive-manifests
  /etc/kubernetes/checkpoint-secrets
  /etc/kubernetes/checkpoint-configmaps
)
# The unit's RuntimeDirectory, kept when it stops: the lock file, an admin socket.
readonly RUNTIME_DIR=/run/ckpt-agent
readonly CHECKPOINT_ANNOTATION=checkpointer.alpha.coreos.com/checkpoint-of
# Marker of the agent's temp files (lib/disk/atomic_write.ts TEMP_MARKER).
readonly TEMP_MARKER=.ckpt-tmp-

row() { # PATH MODE [NOTE]
  printf '  %-40s %s%s\n' "$1" "$2" "${3:+  $3}"
}

usage() {
  cat <<EOF
usage: install.sh [--root DIR [--package]] [--binary PATH]
       install.sh [--root DIR [--package]] --uninstall [--purge]
       install.sh [--root DIR] --admin-token

Installs ckpt-agent on this node, then runs 'systemctl daemon-reload' and
'systemctl enable --now ${NAME}' (restarting it when its binary or unit changed).
Needs root. A second run changes nothing and says "unchanged".

EOF
  local dir
  row "$BIN" 0755 "the binary, replaced atomically"
  row "$UNIT" 0644 "the systemd unit"
  row "${SHARE_DIR}/${RULES_FILE}" 0644 "Prometheus alert rules, to copy"
  row "$MAN_PAGE" 0644 "the manual page, ckpt-agent(8)"
  row "$CONFIG" 0644 "default configuration, never overwritten"
  row "$ADMIN_TOKEN" 0600 "admin token, random, made where missing (not with --package)"
  row "$STATE_DIR" 0700
  for dir in "${CHECKPOINT_DIRS[@]}"; do row "$dir" 0700; done
  row "$MANIFESTS_DIR" 0755 "only if missing (it is the kubelet's)"
  cat <<EOF

options:
  --root DIR     stage the files under DIR for a package: no systemctl, no root needed
  --binary PATH  the binary to install (default: dist/ckpt-agent next to this script)
  --package      with --root: the Debian package's layout (deno task deb): the binary in
                 /usr/bin, the unit in /usr/lib/systemd/system (its ExecStart changed to
                 match), the rules in /usr/share/ckpt-agent, and not ${MANIFESTS_DIR}
                 nor the admin token (the package's postinst makes it on the node)
  --admin-token  only make the admin token where it is missing (the package's postinst)
  --uninstall    stop and disable the service, remove the binary, the unit and the
                 rules; keep the configuration, the state and every checkpoint
  --purge        with --uninstall: also remove ${CONFIG_DIR}, ${STATE_DIR},
                 ${RUNTIME_DIR}, the checkpoint directories and the unit's drop-ins.
                 ${MANIFESTS_DIR} belongs to the kubelet: it is never removed,
                 nor is anything in it but the agent's leftover temp files.
                 Refused while it holds active checkpoints: the kubelet may be running them
                 (perhaps as the only copy of the control plane) and they would run on with
                 their secrets deleted and nothing left to withdraw them. They go away when
                 their pods run again; or delete them yourself, then purge.
  -h, --help     show this help
EOF
}

die() {
  echo "install.sh: $*" >&2
  exit 1
}

usage_error() {
  echo "install.sh: $*" >&2
  echo "try: install.sh --help" >&2
  exit 2
}

root=""
staging=false
binary="${SCRIPT_DIR}/dist/ckpt-agent"
binary_given=false
uninstall=false
purge=false
package=false
token_only=false

while (($#)); do
  case "$1" in
    --root)
      (($# >= 2)) || usage_error "--root needs a directory"
      [[ -n "$2" ]] || usage_error "--root needs a directory"
      root="${2%/}"
      staging=true
      shift 2
      ;;
    --binary)
      (($# >= 2)) || usage_error "--binary needs a path"
      binary="$2"
      binary_given=true
      shift 2
      ;;
    --package) package=true; shift ;;
    --uninstall) uninstall=true; shift ;;
    --purge) purge=true; shift ;;
    --admin-token) token_only=true; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage_error "unknown argument: $1" ;;
  esac
done

if $purge && ! $uninstall; then usage_error "--purge goes with --uninstall"; fi
if $uninstall && $binary_given; then usage_error "--binary makes no sense with --uninstall"; fi
if $package && ! $staging; then usage_error "--package goes with --root"; fi
if $token_only && ($uninstall || $binary_given || $package); then
  usage_error "--admin-token goes alone, or with --root"
fi
# The package's files are the distribution's (/usr), its unit a vendor unit (which the operator's
# /etc/systemd/system overrides); the kubelet's directory is not staged, so that dpkg never owns
# it and never removes it.
if $package; then
  BIN=/usr/bin/ckpt-agent
  UNIT=/usr/lib/systemd/system/ckpt-agent.service
  SHARE_DIR=/usr/share/ckpt-agent
  MAN_PAGE=/usr/share/man/man8/ckpt-agent.8
fi
readonly BIN UNIT SHARE_DIR MAN_PAGE
if ! $staging; then
  ((EUID == 0)) || die "must run as root to install on this node (or stage into a directory with --root DIR)"
  command -v systemctl >/dev/null || die "systemctl not found: this node does not run systemd (stage with --root DIR instead)"
fi

umask 022
changes=0
# A temp file not yet renamed into place, and the unit as the package runs it; removed when the
# script stops for any reason.
pending_temp=""
unit_copy=""
cleanup() {
  [[ -z "$pending_temp" ]] || rm -f -- "$pending_temp"
  [[ -z "$unit_copy" ]] || rm -f -- "$unit_copy"
}
trap cleanup EXIT

report() { # STATUS PATH
  printf '%-10s %s\n' "$1" "${root}$2"
  [[ "$1" == unchanged || "$1" == absent || "$1" == kept ]] || changes=$((changes + 1))
}

mode_of() { stat -c '%a' -- "$1"; }

# Copies SOURCE to root+TARGET with MODE through a temp file in the same directory and a rename,
# so that a running service never sees a half-written file; nothing is written when the target
# already has this content and mode.
install_file() { # SOURCE TARGET MODE
  local source="$1" target="${root}$2" mode="$3" status=installed temp
  if [[ -f "$target" && ! -L "$target" ]]; then
    if cmp -s -- "$source" "$target" && [[ "$(mode_of "$target")" == "${mode#0}" ]]; then
      report unchanged "$2"
      return
    fi
    status=updated
  fi
  mkdir -p -- "$(dirname -- "$target")"
  pending_temp="$(mktemp -- "$(dirname -- "$target")/.$(basename -- "$target").XXXXXX")"
  cp -- "$source" "$pending_temp"
  chmod "$mode" -- "$pending_temp"
  sync -- "$pending_temp"
  mv -f -- "$pending_temp" "$target"
  pending_temp=""
  sync -- "$(dirname -- "$target")"
  report "$status" "$2"
}

# The shipped unit, its ExecStart pointed at BIN when the binary goes elsewhere.
install_unit() {
  local shipped="${SCRIPT_DIR}/systemd/ckpt-agent.service"
  if [[ "$BIN" == "$UNIT_EXEC" ]]; then
    install_file "$shipped" "$UNIT" 0644
    return
  fi
  grep -qF "ExecStart=${UNIT_EXEC} " -- "$shipped" || die "${shipped}: its ExecStart does not run ${UNIT_EXEC}"
  unit_copy="$(mktemp)"
  sed "s|^ExecStart=${UNIT_EXEC} |ExecStart=${BIN} |" -- "$shipped" >"$unit_copy"
  install_file "$unit_copy" "$UNIT" 0644
}

# The admin token: 32 random bytes in hex, 0600, written through a temp file and a rename so that
# the agent never reads half a token. One that is there is the operator's (perhaps rotated): kept.
ensure_admin_token() {
  local target="${root}${ADMIN_TOKEN}"
  if [[ -e "$target" || -L "$target" ]]; then
    report unchanged "$ADMIN_TOKEN"
    return
  fi
  mkdir -p -- "$(dirname -- "$target")"
  # mktemp makes the file 0600 before anything is written in it.
  pending_temp="$(mktemp -- "$(dirname -- "$target")/.$(basename -- "$target").XXXXXX")"
  od -An -vtx1 -N32 /dev/urandom | tr -d ' \n' >"$pending_temp"
  echo >>"$pending_temp"
  chmod 0600 -- "$pending_temp"
  sync -- "$pending_temp"
  mv -f -- "$pending_temp" "$target"
  pending_temp=""
  sync -- "$(dirname -- "$target")"
  report created "$ADMIN_TOKEN"
}

# Creates root+DIR with MODE; with "enforce", also resets the mode of an existing directory.
ensure_dir() { # DIR MODE keep|enforce
  local dir="${root}$1" mode="$2" policy="$3"
  if [[ -d "$dir" ]]; then
    if [[ "$policy" == enforce && "$(mode_of "$dir")" != "${mode#0}" ]]; then
      chmod "$mode" -- "$dir"
      report "mode $mode" "$1"
    else
      report unchanged "$1"
    fi
    return
  fi
  [[ -e "$dir" || -L "$dir" ]] && die "${dir} exists and is not a directory"
  mkdir -p -- "$(dirname -- "$dir")"
  mkdir -m "$mode" -- "$dir"
  report created "$1"
}

remove_path() { # PATH
  if [[ -e "${root}$1" || -L "${root}$1" ]]; then
    rm -rf -- "${root}$1"
    report removed "$1"
  else
    report absent "$1"
  fi
}

# Checkpoint manifests in the kubelet's static-pod directory, i.e. pods the kubelet may be
# running. Any file that mentions the annotation counts, and so does an unreadable one: a false
# match only makes purge refuse.
active_checkpoints() {
  local file
  # The glob skips dot files, as the kubelet does.
  for file in "${root}${MANIFESTS_DIR}"/*; do
    [[ -f "$file" ]] || continue
    grep -qF -- "$CHECKPOINT_ANNOTATION" "$file" || (($? == 2)) || continue
    printf '%s\n' "$file"
  done
}

do_install() {
  [[ -f "$binary" ]] || die "binary not found: ${binary} (build it with 'deno task compile', or pass --binary PATH)"
  [[ -x "$binary" ]] || die "binary is not executable: ${binary}"
  local was_active=false
  if ! $staging && systemctl is-active --quiet "$NAME"; then was_active=true; fi

  ensure_dir "$KUBE_DIR" 0755 keep
  $package || ensure_dir "$MANIFESTS_DIR" 0755 keep
  local dir
  for dir in "${CHECKPOINT_DIRS[@]}"; do ensure_dir "$dir" 0700 enforce; done
  ensure_dir "$STATE_DIR" 0700 enforce
  ensure_dir "$CONFIG_DIR" 0755 enforce

  local before=$changes
  install_file "$binary" "$BIN" 0755
  install_unit
  local replaced=$((changes - before))
  install_file "${SCRIPT_DIR}/${RULES_FILE}" "${SHARE_DIR}/${RULES_FILE}" 0644
  install_file "${SCRIPT_DIR}/docs/ckpt-agent.8" "$MAN_PAGE" 0644

  # The configuration holds no secret (the admin token has its own 0600 file), so it stays
  # readable for operators. Whatever is there already is the operator's: never replaced.
  local shipped="${SCRIPT_DIR}/systemd/config.yaml"
  if [[ ! -e "${root}${CONFIG}" && ! -L "${root}${CONFIG}" ]]; then
    install_file "$shipped" "$CONFIG" 0644
  elif cmp -s -- "$shipped" "${root}${CONFIG}"; then
    report unchanged "$CONFIG"
  else
    report kept "$CONFIG"
  fi
  $package || ensure_admin_token

  if $staging; then return; fi
  systemctl daemon-reload
  systemctl enable --now "$NAME"
  # enable --now leaves a running service alone; it must pick up a new binary or unit.
  if $was_active && ((replaced > 0)); then
    systemctl restart "$NAME"
    echo "restarted  ${NAME}.service"
  fi
}

do_uninstall() {
  local active
  active="$(active_checkpoints)"
  if $purge && [[ -n "$active" ]]; then
    die "refusing to purge: the kubelet may be running these checkpoints, and purging would delete
their secrets while they run (remove them first; nothing was changed):
${active}"
  fi

  if ! $staging && [[ -e "$UNIT" ]]; then
    systemctl disable --now "$NAME"
  fi
  remove_path "$BIN"
  remove_path "$UNIT"
  remove_path "$SHARE_DIR"
  remove_path "$MAN_PAGE"
  if ! $staging; then systemctl daemon-reload; fi

  if $purge; then
    remove_path "$UNIT_DROP_INS"
    remove_path "$CONFIG_DIR"
    remove_path "$STATE_DIR"
    local dir
    for dir in "${CHECKPOINT_DIRS[@]}"; do remove_path "$dir"; done
    remove_path "$RUNTIME_DIR"
    # Temp files the agent left in the kubelet's directory when it crashed mid-write; the kubelet
    # ignores them, and nothing else in that directory is ours to remove.
    local temp
    if [[ -d "${root}${MANIFESTS_DIR}" ]]; then
      while IFS= read -r -d '' temp; do
        remove_path "${temp#"${root}"}"
      done < <(find "${root}${MANIFESTS_DIR}" -maxdepth 1 -type f -name ".*${TEMP_MARKER}*" -print0)
    fi
  elif [[ -n "$active" ]]; then
    echo "note: these active checkpoints stay in ${root}${MANIFESTS_DIR}, and nothing will withdraw them while ${NAME} is not installed:" >&2
    echo "$active" >&2
  fi
}

if $token_only; then
  ensure_admin_token
elif $uninstall; then
  do_uninstall
else
  do_install
fi

if ((changes == 0)); then
  echo "${NAME}: unchanged"
else
  echo "${NAME}: ${changes} change(s)"
fi
