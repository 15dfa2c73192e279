#!/bin/sh
# The Feature's entrypoint: the devcontainer CLI runs it at every start of the
# container (`docker restart` included), before the container's own command and
# before any lifecycle command of the user's. It takes away sudo beyond the Feature's
# rule, gives the remote user loopback only at once, then applies the allowlist; if
# that fails, egress stays closed.
#
# Given PID 1 with a command (`agent-sandbox start`, `docker run`, a devcontainer.json
# with "overrideCommand": false), it stays PID 1 and runs the command as its child: at
# `docker stop` (closing VS Code's window) the broker brings home what the agent
# committed last, within Docker's grace period, before the command is stopped.
log=/tmp/agent-sandbox-home.log
[ "$(id -u)" = 0 ] && log=/var/log/agent-sandbox-home.log
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi
}
# This start of the container, as `git-home start` records it (PID 1's start time).
started_now() {
  [ "$(cat /var/lib/agent-sandbox/broker/started 2>/dev/null)" = "$(sed 's/.*) //' /proc/1/stat | cut -d' ' -f20)" ]
}
supervise() {
  exec 3<&0
  "$@" <&3 3<&- &
  child=$!
  exec 3<&-
  trap 'as_root /usr/local/bin/agent-sandbox git-home sync </dev/null >>"$log" 2>&1; kill -TERM "$child" 2>/dev/null; exit 143' TERM
  trap 'kill -INT "$child" 2>/dev/null' INT
  while :; do
    wait "$child"
    status=$?
    kill -0 "$child" 2>/dev/null || exit "$status"
  done
}
# The devcontainer CLI ran this as the Feature's entrypoint already, then handed PID 1
# to the image's command (this again): the guard rails are up.
if [ "$$" = 1 ] && [ "$#" -gt 0 ] && started_now; then
  supervise "$@"
fi
if [ "$(id -u)" = 0 ]; then
  # No sudo beyond the Feature's rule, again: a grant that came back since the build
  # (a Feature installed after this one) is commented out before the firewall starts.
  # One that cannot be taken away stops the container: with root at hand, the agent's
  # user could undo every other guard.
  if ! /usr/local/bin/agent-sandbox sudo-restrict >/var/log/agent-sandbox-sudo.log 2>&1; then
    cat /var/log/agent-sandbox-sudo.log >&2
    echo "agent-sandbox: the container does not start: sudo still grants the agent's user more than the Feature's rule (see above)" >&2
    exit 1
  fi
  # The session repository (a container with the user's .git mounted for the broker):
  # seeded from the user's refs when new. If it cannot be, the project has no
  # repository inside, and the reason is in the log.
  # Then, in the background, what a session stopped before its broker ran (a `docker
  # kill` right after a commit) comes home through the checks; the agent's next git
  # command says what did.
  if /usr/local/bin/agent-sandbox git-home start >/var/log/agent-sandbox-home.log 2>&1; then
    (printf 'later\n' | /usr/local/bin/agent-sandbox git-home sync >>/var/log/agent-sandbox-home.log 2>&1 &)
  else
    cat /var/log/agent-sandbox-home.log >&2
  fi
  /usr/local/bin/agent-sandbox firewall start >/var/log/agent-sandbox-firewall.log 2>&1
else
  # The image runs as a non-root user: the one sudo rule covers `firewall start`.
  if sudo -n /usr/local/bin/agent-sandbox git-home start >/tmp/agent-sandbox-home.log 2>&1; then
    (printf 'later\n' | sudo -n /usr/local/bin/agent-sandbox git-home sync >>/tmp/agent-sandbox-home.log 2>&1 &)
  else
    cat /tmp/agent-sandbox-home.log >&2
  fi
  sudo -n /usr/local/bin/agent-sandbox firewall start >/tmp/agent-sandbox-firewall.log 2>&1
fi
if [ "$$" = 1 ] && [ "$#" -gt 0 ]; then
  supervise "$@"
fi
[ "$#" -eq 0 ] || exec "$@"
