//! Integration tests of the secret matcher and the scanner on real temporary trees.

mod matcher;
mod scan;

/// The built-in patterns, from the one place they are defined: the config defaults.
fn default_patterns() -> Vec<String> {
    config::defaults().secret_patterns.into_iter().map(|item| item.value).collect()
}

fn default_allow() -> Vec<String> {
    config::defaults().secret_allow.into_iter().map(|item| item.value).collect()
}
