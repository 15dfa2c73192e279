#!/bin/sh
# The agent-sandbox Dev Container Feature, run as root while the image is built.
# Adds to a Debian or Ubuntu based image: the agent-sandbox binary (the host's own,
# which `agent-sandbox devcontainer init` puts next to this file, or the static one the
# published Feature carries: `cargo xtask feature`), the git guard in
# front of every git entry point, the /.agent-sandbox marker, the tool guard's managed
# files for Claude Code and Codex, the firewall with its image policy and its one sudo
# rule (the agent's user keeps no other sudo), the entrypoint that applies it at every
# start, and the remote user's shell setup. Running it twice changes nothing.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
user=${_REMOTE_USER:-node}
container_user=${_CONTAINER_USER:-$user}
fail() { echo "agent-sandbox Feature: $*" >&2; exit 1; }

[ -r /etc/os-release ] || fail "no /etc/os-release: only Debian and Ubuntu based images are supported (not Alpine, distroless or scratch)"
. /etc/os-release
case " ${ID:-} ${ID_LIKE:-} " in
  *" debian "* | *" ubuntu "*) ;;
  *) fail "this image is ${PRETTY_NAME:-${ID:-unknown}}: only Debian and Ubuntu based images are supported (not Alpine, distroless or scratch)" ;;
esac
[ -x "$here/agent-sandbox" ] || fail "the agent-sandbox binary is not in the Feature's folder ($here): run 'agent-sandbox devcontainer init' on the host, which puts its own binary there (it is ignored by git), or name the published Feature, which carries its own"
"$here/agent-sandbox" --version >/dev/null 2>&1 || fail "the agent-sandbox binary in the Feature's folder does not run in this image (another architecture, or an older C library than the host's)"
[ "$user" != root ] || fail "remoteUser is root: the agent could turn the firewall off (set remoteUser to a non-root user)"

# What the guard, the push verifier (ssh remotes) and the firewall need, installed
# only when missing.
missing=""
for pair in git:git ssh:openssh-client iptables:iptables ip6tables:iptables sudo:sudo curl:curl; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || missing="$missing ${pair#*:}"
done
[ -e /etc/ssl/certs/ca-certificates.crt ] || missing="$missing ca-certificates"
if [ -n "$missing" ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
  rm -rf /var/lib/apt/lists/*
fi

# The remote user (created when the image has none of that name).
if ! id "$user" >/dev/null 2>&1; then
  if getent passwd 1000 >/dev/null; then
    useradd --create-home --user-group --shell /bin/bash "$user"
  else
    useradd --create-home --uid 1000 --user-group --shell /bin/bash "$user"
  fi
fi
home=$(getent passwd "$user" | cut -d: -f6)

# The binary, on PATH and in front of every git entry point; the real git moves to the
# fixed root-owned path the guard execs.
install -m 0755 "$here/agent-sandbox" /usr/local/bin/agent-sandbox
mkdir -p /usr/libexec/agent-sandbox /etc/agent-sandbox/project /var/lib/agent-sandbox /usr/local/share/agent-sandbox
# The user's .git is mounted in here for the git broker (root) alone.
install -d -m 0700 -o root -g root /var/lib/agent-sandbox/home
git_path=$(command -v git)
if [ ! -e /usr/libexec/agent-sandbox/git ]; then
  cp -p "$(readlink -f "$git_path")" /usr/libexec/agent-sandbox/git
fi
for entry in /usr/bin/git /usr/local/bin/git "$git_path"; do
  [ -e "$entry" ] || [ -L "$entry" ] || continue
  [ "$entry" = /usr/local/bin/agent-sandbox ] && continue
  rm -f "$entry" && ln -s /usr/local/bin/agent-sandbox "$entry"
done
exec_path=$(/usr/libexec/agent-sandbox/git --exec-path 2>/dev/null || true)
if [ -n "$exec_path" ] && [ -e "$exec_path/git" ]; then
  rm -f "$exec_path/git" && ln -s /usr/local/bin/agent-sandbox "$exec_path/git"
fi
touch /.agent-sandbox && chmod 0444 /.agent-sandbox

# The tool guard: Claude Code's managed settings and Codex's managed requirements run
# `agent-sandbox tool-guard` before every tool call (and only managed hooks run), with
# the project's tools.* as `devcontainer init` wrote them into tool-guard.json; each
# file root-owned 0644 in a root-owned 0755 directory, merged into the image's own.
if [ -e "$here/tool-guard.json" ]; then
  /usr/local/bin/agent-sandbox tool-guard-install "$here/tool-guard.json"
else
  /usr/local/bin/agent-sandbox tool-guard-install
fi || fail "the tool guard's managed files could not be written (see above)"

# The image's configuration (root-owned; its network section is the firewall's policy,
# with the project's), the proxy's own user (the only one the firewall lets out), the
# entrypoint, the one sudo rule. An older image's firewall.jsonc is replaced.
install -m 0644 "$here/config.jsonc" /etc/agent-sandbox/config.jsonc
rm -f /etc/agent-sandbox/firewall.jsonc
id agent-sandbox-net >/dev/null 2>&1 \
  || useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin agent-sandbox-net \
  || fail "cannot create the user agent-sandbox-net for the network proxy"
# The user the push verifier runs the checks as (no credentials, not the agent's).
id agent-sandbox-check >/dev/null 2>&1 \
  || useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin agent-sandbox-check \
  || fail "cannot create the user agent-sandbox-check for the push verifier"
[ -x /usr/bin/setpriv ] || fail "/usr/bin/setpriv (util-linux) is missing: the push verifier reads the repository through it"
install -m 0644 "$here/bashrc" /etc/agent-sandbox/bashrc
install -m 0755 "$here/entrypoint.sh" /usr/local/share/agent-sandbox/entrypoint.sh
sudoers=/etc/sudoers.d/agent-sandbox
{
  echo "# The agent may apply and show the firewall, hand a push to the verifier and"
  echo "# ask the broker to bring its commits home,"
  echo "# nothing else, with exactly these arguments: the policy comes from root-owned"
  echo "# files, never from the caller, and the verifier trusts nothing in its request."
  for who in $(printf '%s\n%s\n' "$user" "$container_user" | grep -vx root | sort -u); do
    echo "Defaults:$who env_reset"
    echo "$who ALL=(root) NOPASSWD: /usr/local/bin/agent-sandbox firewall apply, /usr/local/bin/agent-sandbox firewall status, /usr/local/bin/agent-sandbox firewall start, /usr/local/bin/agent-sandbox push-verify, /usr/local/bin/agent-sandbox git-home start, /usr/local/bin/agent-sandbox git-home sync"
  done
} > "$sudoers.next"
chmod 0440 "$sudoers.next"
visudo -c -q -f "$sudoers.next" >/dev/null || fail "the sudo rule does not parse"
mv "$sudoers.next" "$sudoers"
# No sudo beyond that rule: images built with common-utils (every
# mcr.microsoft.com/devcontainers image) grant their user ALL=(root) NOPASSWD:ALL, a way
# to root that undoes the firewall and every root-owned guard. Each sudoers line naming
# the agent's users is commented out (a group's rule stays, and they leave the group),
# then sudo's own listing is checked; the entrypoint does it again at every start.
printf '%s\n%s\n' "$user" "$container_user" | grep -vx root | sort -u > /etc/agent-sandbox/agent-users
chmod 0644 /etc/agent-sandbox/agent-users
/usr/local/bin/agent-sandbox sudo-restrict || fail "the agent's user keeps sudo beyond the Feature's rule (see above)"

# Persistent paths (named volumes copy this ownership when first mounted) and the
# remote user's shell setup.
mkdir -p /commandhistory "$home/.claude" "$home/.codex"
touch /commandhistory/.bash_history
chown -R "$user:" /commandhistory "$home/.claude" "$home/.codex"
grep -qx '. /etc/agent-sandbox/bashrc' "$home/.bashrc" 2>/dev/null || echo '. /etc/agent-sandbox/bashrc' >> "$home/.bashrc"
chown "$user:" "$home/.bashrc"
echo "agent-sandbox Feature: installed for $user ($("$here/agent-sandbox" --version))"
