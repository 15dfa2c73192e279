//! README's install line, `sh install.sh`, on a fresh account: with bubblewrap there it
//! installs the binary into `~/.local/bin` and starts one sandbox to prove the machine
//! can; without it and without a way to install it, it says the exact line to run.

use std::{path::Path, process::Command};

use crate::support::{require_bwrap, World, BIN};

fn install_sh() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("install.sh")
}

#[test]
fn install_sh_installs_the_binary_and_proves_a_sandbox_starts() {
    require_bwrap!();
    let world = World::bare();
    let out = Command::new("sh")
        .arg(install_sh())
        .env_clear()
        .env("HOME", &world.home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("AGENT_SANDBOX_BIN", &*BIN)
        .output()
        .expect("sh");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let installed = world.home.join(".local/bin/agent-sandbox");
    assert_eq!(fs_err::read(&installed).expect("installed"), fs_err::read(&*BIN).expect("built"));
    assert!(err.contains("add ") && err.contains(".local/bin to your PATH"), "{err}");
    assert!(err.contains("ready: cd to your project and run: agent-sandbox exec -- claude"), "{err}");
    // Again: idempotent.
    let again = Command::new("sh")
        .arg(install_sh())
        .env_clear()
        .env("HOME", &world.home)
        .env("PATH", format!("{}/.local/bin:/usr/local/bin:/usr/bin:/bin", world.home.display()))
        .env("AGENT_SANDBOX_BIN", &*BIN)
        .output()
        .expect("sh");
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success() && !err.contains("to your PATH"), "{err}");
    // Debian's stock ~/.profile adds ~/.local/bin when it exists at login: the advice is
    // to log in again, not to add a second line.
    let stock = "if [ -d \"$HOME/.local/bin\" ] ; then\n    PATH=\"$HOME/.local/bin:$PATH\"\nfi\n";
    fs_err::write(world.home.join(".profile"), stock).expect("profile");
    let stocked = Command::new("sh")
        .arg(install_sh())
        .env_clear()
        .env("HOME", &world.home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("AGENT_SANDBOX_BIN", &*BIN)
        .output()
        .expect("sh");
    let err = String::from_utf8_lossy(&stocked.stderr);
    assert!(stocked.status.success() && err.contains("your ~/.profile adds it at your next login"), "{err}");
    assert!(!err.contains(">> ~/.profile"), "{err}");
}

#[test]
fn without_bubblewrap_and_no_way_to_install_it_install_sh_names_the_line() {
    let world = World::bare();
    // A PATH with the basic tools but neither bwrap nor sudo nor a package manager.
    let tools = world.path("tools");
    fs_err::create_dir_all(&tools).expect("mkdir");
    for tool in ["sh", "dirname", "id", "mkdir", "cp", "chmod", "mv", "mktemp", "rmdir", "cat"] {
        let found = ["/usr/bin", "/bin"].iter().map(|dir| Path::new(dir).join(tool)).find(|path| path.exists());
        std::os::unix::fs::symlink(found.expect(tool), tools.join(tool)).expect("symlink");
    }
    let out = Command::new(tools.join("sh"))
        .arg(install_sh())
        .env_clear()
        .env("HOME", &world.home)
        .env("PATH", &tools)
        .env("AGENT_SANDBOX_BIN", &*BIN)
        .output()
        .expect("sh");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let debian = fs_err::read_to_string("/etc/os-release").is_ok_and(|text| text.contains("ID=debian"));
    if debian {
        assert!(
            err.contains(
                "bubblewrap is missing and could not be installed here; run: sudo apt-get install -y bubblewrap"
            ),
            "{err}"
        );
    } else {
        assert!(err.contains("bubblewrap is missing"), "{err}");
    }
    assert!(world.home.join(".local/bin/agent-sandbox").exists(), "the binary is installed anyway");
}
