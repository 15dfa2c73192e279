#!/bin/bash
# The checks every scenario of `devcontainer features test` runs inside the container,
# as its remote user: the rails the Feature promises, each an attack that must fail
# beside the legitimate use that must keep working (the book: "Beyond one machine").
# scenarios.json (plain JSON: tests/it/devcontainer/feature.rs edits a copy) names the
# images `cargo xtask test` makes without a registry: Debian 12 bootstrapped, Ubuntu
# 22.04 bootstrapped (an older C library than Debian's: the static binary must not care;
# left out where Ubuntu's mirror does not answer), and the base image, which has the
# Feature already (a second install must change nothing). Every scenario's user is one
# the image lacks or has without sudo; root is refused (the fail-closed test).
set -e
# shellcheck source=/dev/null
source dev-container-features-test-lib

# Not root, and no way to it: sudo lists only the Feature's rule.
check "the remote user is not root" test "$(id -u)" != 0
check "sudo -n true is refused" bash -c '! sudo -n true 2>/dev/null'
check "sudo -n -l lists only agent-sandbox commands" bash -c \
  'sudo -n -l | sed -n "/may run the following/,\$p" | tail -n +2 | grep -v "^ *(root) NOPASSWD: /usr/local/bin/agent-sandbox " | grep -v "^ */usr/local/bin/agent-sandbox " | grep -v "^ *\$" | (! grep .)'

# The marker and the binary (static: it runs on any Debian or Ubuntu release).
check "the marker is root's and read-only" bash -c \
  'test -f /.agent-sandbox && test "$(stat -c %U /.agent-sandbox)" = root && ! test -w /.agent-sandbox'
check "agent-sandbox check says it is inside" agent-sandbox check

# The git guard in front of git: --no-verify refused, a plain commit runs the hook.
repo=$(mktemp -d)
git -C "$repo" init -q -b main
git -C "$repo" config user.name t
git -C "$repo" config user.email t@t.invalid
printf '#!/bin/sh\necho hook-ran >&2\n' > "$repo/.git/hooks/pre-commit"
chmod +x "$repo/.git/hooks/pre-commit"
check "git is the guard" bash -c 'test "$(readlink -f "$(command -v git)")" = /usr/local/bin/agent-sandbox'
check "git commit --no-verify is refused" bash -c "cd '$repo' && ! git commit -q --allow-empty --no-verify -m x 2>/dev/null"
check "git commit -n is refused" bash -c "cd '$repo' && ! git commit -q --allow-empty -n -m x 2>/dev/null"
check "git commit runs the pre-commit hook" bash -c "cd '$repo' && git commit -q --allow-empty -m x 2>&1 | grep -q hook-ran"

# The firewall: applied by the entrypoint at start, or closed; never open.
check "the firewall is applied or closed" bash -c \
  'agent-sandbox firewall wait >/dev/null 2>&1; agent-sandbox firewall status | head -1 | grep -Eq "^firewall: (on|CLOSED)"'

# The tool guard's managed files, root's.
check "Claude Code's managed settings are root's" bash -c \
  'test "$(stat -c %U /etc/claude-code/managed-settings.json)" = root && ! test -w /etc/claude-code/managed-settings.json'

reportResults
