//! `git commit`: every spelling of `--no-verify` is refused; messages, pathspecs and
//! option values that merely look like it are not.

use crate::check_args;

#[test]
fn commit_no_verify_is_refused_in_every_spelling() {
    check_args(&[
        (&["commit", "-n"], "no-verify"),
        (&["commit", "--no-verify"], "no-verify"),
        (&["commit", "-m", "x", "-n"], "no-verify"),
        (&["commit", "-qn", "-m", "x"], "no-verify"),
        (&["commit", "-anm", "x"], "no-verify"),
        (&["commit", "-nam", "x"], "no-verify"),
        (&["commit", "-am", "x", "-n"], "no-verify"),
        (&["commit", "file.txt", "--no-verify", "-m", "x"], "no-verify"),
        // `-u` takes an attached value only, so the next `-n` is an option.
        (&["commit", "-u", "-n", "-m", "x"], "no-verify"),
        // `-m` takes the next argument whatever it is, here `--`.
        (&["commit", "-m", "--", "-n"], "no-verify"),
        (&["commit", "--no-verify", "--no-no-verify", "--no-verify"], "no-verify"),
    ]);
}

#[test]
fn commit_no_verify_is_refused_when_abbreviated() {
    check_args(&[
        (&["commit", "--no-verif", "-m", "x"], "no-verify"),
        (&["commit", "--no-veri", "-m", "x"], "no-verify"),
        // Ambiguous in git (--no-verbose, --no-verify): git refuses it too.
        (&["commit", "--no-ver", "-m", "x"], "no-verify"),
        (&["commit", "--no-v", "-m", "x"], "no-verify"),
        // `--n` abbreviates the negation of every negatable option.
        (&["commit", "--n", "-m", "x"], "no-verify"),
    ]);
}

#[test]
fn commit_last_verify_switch_wins() {
    check_args(&[
        (&["commit", "--no-verify", "--verify", "-m", "x"], "run"),
        (&["commit", "--verify", "--no-verify", "-m", "x"], "no-verify"),
        (&["commit", "-n", "--verify", "-m", "x"], "run"),
        (&["commit", "-n", "--no-no-verify", "-m", "x"], "run"),
        (&["commit", "-n", "--veri", "-m", "x"], "run"),
        (&["commit", "--verify", "-n", "-m", "x"], "no-verify"),
    ]);
}

#[test]
fn commit_values_that_look_like_no_verify_pass() {
    check_args(&[
        (&["commit", "-m", "-n"], "run"),
        (&["commit", "-mn"], "run"),
        (&["commit", "-am", "-n"], "run"),
        (&["commit", "-m", "never use --no-verify"], "run"),
        (&["commit", "--message=--no-verify"], "run"),
        (&["commit", "--message", "--no-verify"], "run"),
        (&["commit", "-F", "-n"], "run"),
        (&["commit", "--trailer", "-n", "-m", "x"], "run"),
        (&["commit", "-c", "-n"], "run"),
        // `-S` takes an attached key id: signs with key "n".
        (&["commit", "-Sn", "-m", "x"], "run"),
        // `-u` with the attached mode "n".
        (&["commit", "-un", "-m", "x"], "run"),
        (&["commit", "-m", "x", "--", "-n"], "run"),
        (&["commit", "-m", "x", "--end-of-options", "-n"], "run"),
    ]);
}

#[test]
fn commit_without_no_verify_passes() {
    check_args(&[
        (&["commit", "-m", "x"], "run"),
        (&["commit", "-am", "x"], "run"),
        (&["commit", "--amend", "--no-edit"], "run"),
        (&["commit", "--fixup", "HEAD"], "run"),
        (&["commit", "--no-post-rewrite", "-m", "x"], "run"),
        (&["commit", "-v"], "run"),
        (&["commit", "--verify", "-m", "x"], "run"),
        (&["commit", "--no-no-verify", "-m", "x"], "run"),
        // Ambiguous (--verbose, --verify) but neither skips hooks: git reports it.
        (&["commit", "--ve", "-m", "x"], "run"),
        (&["commit", "--a", "-m", "x"], "run"),
        // Unknown to git: it refuses them itself.
        (&["commit", "--frobnicate", "-m", "x"], "run"),
        (&["commit", "-h"], "run"),
        (&["commit", "--help"], "run"),
    ]);
}
