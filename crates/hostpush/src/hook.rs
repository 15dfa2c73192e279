//! The pre-push hook the host's git runs for the checks (the push service's, a
//! container verifier's and the brokers'): its script, and the variable through which
//! it finds its settings.

use std::path::Path;

/// The variable through which the host's pre-push hook (`agent-sandbox hook pre-push`)
/// finds its settings; set only by this service, on the host.
pub const SETTINGS_VAR: &str = "AGENT_SANDBOX_PUSH_GUARD";

/// The pre-push hook the host's git runs: this binary's hook guard, nothing else.
pub fn hook_script(self_exe: &Path) -> String {
    format!("#!/bin/sh\nexec {} hook pre-push \"$@\"\n", util::single_quoted(&self_exe.to_string_lossy()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hook_runs_this_binarys_hook_guard_and_nothing_else() {
        assert_eq!(
            hook_script(Path::new("/opt/a b/agent-sandbox")),
            "#!/bin/sh\nexec '/opt/a b/agent-sandbox' hook pre-push \"$@\"\n"
        );
    }
}
