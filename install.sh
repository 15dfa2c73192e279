#!/bin/sh
# Installs agent-sandbox for the current user: bubblewrap from the system's packages
# (directly as root, through sudo when it asks no password; otherwise it prints the
# exact line to run), and the binary into ~/.local/bin (built from this checkout with
# cargo, or copied from AGENT_SANDBOX_BIN when you already have one). Then it starts a
# sandbox once to prove the machine can run one, or says what stops it.
#
#   sh install.sh
#
# Idempotent: run it again after an upgrade.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
prefix="${HOME:?HOME is not set}/.local"
bin="$prefix/bin/agent-sandbox"
missing=""

say() { printf 'install.sh: %s\n' "$*" >&2; }

# The package manager's install line for bubblewrap, from /etc/os-release.
package_line() {
    id=""; like=""
    if [ -r /etc/os-release ]; then
        id=$(. /etc/os-release && printf '%s' "${ID:-}")
        like=$(. /etc/os-release && printf '%s' "${ID_LIKE:-}")
    fi
    case " $id $like " in
        *" debian "*|*" ubuntu "*) echo "apt-get install -y bubblewrap" ;;
        *" fedora "*|*" rhel "*|*" centos "*) echo "dnf install -y bubblewrap" ;;
        *" arch "*) echo "pacman -S --noconfirm bubblewrap" ;;
        *" suse "*|*" opensuse "*) echo "zypper --non-interactive install bubblewrap" ;;
        *" alpine "*) echo "apk add bubblewrap" ;;
        *) echo "" ;;
    esac
}

if command -v bwrap >/dev/null 2>&1; then
    say "bubblewrap: $(bwrap --version 2>/dev/null || echo found)"
else
    line=$(package_line)
    if [ -z "$line" ]; then
        missing="install bubblewrap (0.8 or newer) with your system's package manager"
    elif [ "$(id -u)" = 0 ] && command -v "${line%% *}" >/dev/null 2>&1; then
        say "installing bubblewrap: $line"
        # shellcheck disable=SC2086
        $line >/dev/null || missing="sudo $line"
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        say "installing bubblewrap: sudo $line"
        # shellcheck disable=SC2086
        sudo -n $line >/dev/null || missing="sudo $line"
    else
        missing="sudo $line"
    fi
fi

mkdir -p "$prefix/bin"
if [ -n "${AGENT_SANDBOX_BIN:-}" ]; then
    say "installing $AGENT_SANDBOX_BIN as $bin"
    cp "$AGENT_SANDBOX_BIN" "$bin.new"
    chmod 755 "$bin.new"
    mv "$bin.new" "$bin"
elif command -v cargo >/dev/null 2>&1; then
    say "building agent-sandbox with cargo (a few minutes the first time)"
    cargo install --quiet --locked --force --path "$here" --root "$prefix"
else
    say "cargo is missing: install Rust (https://rustup.rs: curl --proto '=https' -sSf https://sh.rustup.rs | sh), then run this again"
    exit 1
fi
say "installed $bin"

case ":${PATH:-}:" in
    *":$prefix/bin:"*) ;;
    *)
        if [ "$prefix/bin" = "$HOME/.local/bin" ] && grep -qs '\.local/bin' "$HOME/.profile"; then
            # Debian's and Ubuntu's stock ~/.profile add it when it exists at login.
            say "$prefix/bin is not on your PATH yet: your ~/.profile adds it at your next login (or run: export PATH=\"$prefix/bin:\$PATH\")"
        else
            say "add $prefix/bin to your PATH: echo 'export PATH=\"$prefix/bin:\$PATH\"' >> ~/.profile (then log in again)"
        fi
        ;;
esac

if [ -n "$missing" ]; then
    say "bubblewrap is missing and could not be installed here; run: $missing"
    exit 1
fi

# One sandbox, started for real: a machine that cannot run one says why, with the fix.
probe=$(mktemp -d)
if (cd "$probe" && "$bin" exec -- true); then
    say "ready: cd to your project and run: agent-sandbox exec -- claude"
    rmdir "$probe"
else
    rmdir "$probe"
    say "agent-sandbox is installed, but this machine cannot start a sandbox yet: see the message above"
    exit 1
fi
