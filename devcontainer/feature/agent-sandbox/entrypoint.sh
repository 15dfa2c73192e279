#!/bin/sh
# Applies the firewall, then runs the command (default: a login shell). Refuses to
# start without the firewall: an open network is not a working sandbox.
if ! sudo -n /usr/local/bin/agent-sandbox firewall apply; then
  echo "agent-sandbox: the firewall could not be applied (does the container have NET_ADMIN and NET_RAW?)" >&2
  exit 1
fi
[ "$#" -gt 0 ] || set -- bash -l
exec "$@"
