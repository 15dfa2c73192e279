//! Secret environment variables are filtered by name; the user can opt one in.

use crate::support::{require_bwrap, World};

#[test]
fn secret_variables_are_dropped_and_the_allowlist_opts_in() {
    require_bwrap!();
    let world = World::new();
    world.project_config(r#"{ "env": { "allow": ["ANTHROPIC_API_KEY", "NODE_*"], "block": ["NODE_SECRET"] } }"#);
    let secret = [
        "OPENAI_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_PROFILE",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "DB_PASSWORD",
        "MY_CREDENTIALS",
        "STRIPE_SECRET",
        "api_key",
        "SSH_AUTH_SOCK",
        "DATABASE_URL",
        "NODE_SECRET",
    ];
    let kept = ["ANTHROPIC_API_KEY", "NODE_ENV", "DEBUG", "CI", "TERM"];
    cmd_url_secrets(&world);
    let mut cmd = world.cmd();
    for name in secret.iter().chain(kept.iter()) {
        cmd.env(name, format!("value-of-{name}"));
    }
    let out = cmd.args(["exec", "--", "env"]).run().ok();
    for name in secret {
        assert!(!out.contains(&format!("{name}=")), "{name} leaked:\n{out}");
    }
    for name in kept {
        assert!(out.contains(&format!("{name}=value-of-{name}\n")), "{name} missing:\n{out}");
    }
    assert!(out.contains(&format!("HOME={}\n", world.home.display())), "{out}");
}

fn cmd_url_secrets(world: &World) {
    let out = world
        .cmd()
        .env("MONGODB_URI", "mongodb://u:TOPSECRET@db.invalid/x")
        .env("UPSTREAM", "https://example.invalid/path")
        .args(["exec", "--", "env"])
        .run()
        .ok();
    assert!(!out.contains("TOPSECRET"), "{out}");
    assert!(out.contains("UPSTREAM=https://example.invalid/path\n"), "{out}");
}

#[test]
fn login_shells_get_the_sandboxes_path_back() {
    require_bwrap!();
    let world = World::new();
    // /etc/profile resets PATH; the generated ~/.profile restores the sandbox's own,
    // with agent-sandbox's runtime directory on it.
    let plain = world.cmd().args(["exec", "--", "sh", "-c", "echo \"$PATH\""]).run().ok();
    let login = world.cmd().args(["exec", "--", "sh", "-lc", "echo \"$PATH\"; agent-sandbox check"]).run().ok();
    assert!(plain.trim_end().ends_with(":/run/agent-sandbox"), "{plain}");
    assert!(login.starts_with(&plain), "login PATH differs:\n{login}\nvs\n{plain}");
}
