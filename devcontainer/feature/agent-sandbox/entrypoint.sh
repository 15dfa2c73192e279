#!/bin/sh
# The Feature's entrypoint: the devcontainer CLI runs it at every start of the
# container (`docker restart` included), before the container's own command and
# before any lifecycle command of the user's. It takes away sudo beyond the Feature's
# rule, gives the remote user loopback only at once, then applies the allowlist; if
# that fails, egress stays closed.
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
[ "$#" -eq 0 ] || exec "$@"
