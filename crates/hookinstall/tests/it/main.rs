//! Integration tests of `hooks install` / `hooks uninstall` on real git repositories in
//! temporary directories: round trips for each hooks layout, where the hooks directory
//! is, conflicts and `--force`, and the installed shims run by real `git commit` and
//! `git push`.

mod conflicts;
mod location;
mod round_trip;
mod run_shim;
mod support;
