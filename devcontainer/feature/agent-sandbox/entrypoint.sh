#!/bin/sh
# The Feature's entrypoint: the devcontainer CLI runs it at every start of the
# container (`docker restart` included), before the container's own command and
# before any lifecycle command of the user's. It gives the remote user loopback only
# at once, then applies the allowlist; if that fails, egress stays closed.
if [ "$(id -u)" = 0 ]; then
  /usr/local/bin/agent-sandbox firewall start >/var/log/agent-sandbox-firewall.log 2>&1
else
  # The image runs as a non-root user: the one sudo rule covers `firewall start`.
  sudo -n /usr/local/bin/agent-sandbox firewall start >/tmp/agent-sandbox-firewall.log 2>&1
fi
[ "$#" -eq 0 ] || exec "$@"
