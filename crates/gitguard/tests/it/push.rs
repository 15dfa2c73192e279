//! `git push`: hook bypass, forced updates, mirror pushes and remote deletions, from
//! flags, refspecs and the remote's configuration; ordinary pushes pass.

use crate::{check, check_args, git};

#[test]
fn push_no_verify_is_refused_but_dash_n_is_a_dry_run() {
    check_args(&[
        (&["push", "--no-verify"], "no-verify"),
        (&["push", "origin", "main", "--no-verify"], "no-verify"),
        (&["push", "--no-verif", "origin", "main"], "no-verify"),
        // git: ambiguous (--no-verbose, --no-verify).
        (&["push", "--no-v", "origin", "main"], "no-verify"),
        (&["push", "-n", "origin", "main"], "run"),
        (&["push", "--dry-run", "origin", "main"], "run"),
        (&["push", "--no-verify", "--verify", "origin", "main"], "run"),
    ]);
}

#[test]
fn push_force_is_refused_in_every_spelling() {
    check_args(&[
        (&["push", "-f"], "force-push"),
        (&["push", "--force", "origin", "main"], "force-push"),
        (&["push", "origin", "main", "-f"], "force-push"),
        (&["push", "-fu", "origin", "main"], "force-push"),
        (&["push", "-uf", "origin", "main"], "force-push"),
        // git: ambiguous (force, force-with-lease, force-if-includes).
        (&["push", "--forc", "origin", "main"], "force-push"),
        (&["push", "--for", "origin", "main"], "force-push"),
        (&["push", "--force-with-lease"], "force-push"),
        (&["push", "--force-with-lease=main:abc123", "origin", "main"], "force-push"),
        (&["push", "--force-with", "origin", "main"], "force-push"),
        (&["push", "--force-if-includes", "origin", "main"], "force-push"),
        (&["push", "--no-force", "--force", "origin", "main"], "force-push"),
        (&["push", "origin", "+main"], "force-push"),
        (&["push", "origin", "+HEAD:main"], "force-push"),
        (&["push", "origin", "+refs/heads/a:refs/heads/b"], "force-push"),
        (&["push", "origin", "main", "+feature"], "force-push"),
        (&["push", "origin", "+:"], "force-push"),
        (&["push", "origin", "--", "+main"], "force-push"),
        // A dry run is judged like the push it rehearses.
        (&["push", "-n", "--force", "origin", "main"], "force-push"),
    ]);
}

#[test]
fn push_without_force_passes() {
    check_args(&[
        (&["push"], "run"),
        (&["push", "origin", "main"], "run"),
        (&["push", "-u", "origin", "feature"], "run"),
        (&["push", "--set-upstream", "origin", "HEAD"], "run"),
        (&["push", "origin", "HEAD:refs/heads/x"], "run"),
        (&["push", "origin", ":"], "run"),
        (&["push", "origin", "tag", "v1.0"], "run"),
        (&["push", "--tags", "origin"], "run"),
        (&["push", "--follow-tags"], "run"),
        (&["push", "--force", "--no-force", "origin", "main"], "run"),
        (&["push", "--force-with-lease", "--no-force-with-lease", "origin", "main"], "run"),
        (&["push", "-o", "+ci.skip", "origin", "main"], "run"),
        (&["push", "--push-option=+x", "origin", "main"], "run"),
        (&["push", "--repo=origin"], "run"),
        (&["push", "--atomic", "origin", "main", "feature"], "run"),
    ]);
}

#[test]
fn push_mirror_is_refused() {
    check_args(&[
        (&["push", "--mirror"], "mirror-push"),
        (&["push", "--mirror", "backup"], "mirror-push"),
        (&["push", "--mirr", "backup"], "mirror-push"),
        (&["push", "--mirror", "--no-mirror", "origin", "main"], "run"),
    ]);
}

#[test]
fn push_deletion_is_refused_unless_allowed() {
    let deletions: &[&[&str]] = &[
        &["push", "origin", ":old"],
        &["push", "origin", "main", ":old"],
        &["push", "origin", ":refs/tags/v1"],
        &["push", "--delete", "origin", "old"],
        &["push", "-d", "origin", "old"],
        &["push", "origin", "--delete", "old"],
        &["push", "--prune", "origin", "refs/heads/*:refs/heads/*"],
        &["push", "origin", "0000000000000000000000000000000000000000:old"],
    ];
    let mut cases = Vec::new();
    for args in deletions {
        cases.push((git(args), "branch-delete"));
        cases.push((git(args).allow_branch_deletion(), "run"));
    }
    // Force is not deletion: still refused when deletion is allowed.
    cases.push((git(&["push", "origin", "+main"]).allow_branch_deletion(), "force-push"));
    cases.push((git(&["push", "--mirror"]).allow_branch_deletion(), "mirror-push"));
    check(&cases);
}

#[test]
fn push_refspecs_and_mirror_from_config_are_refused() {
    let forced = |case: crate::Case| case.config("remote.origin.push", "+refs/heads/*:refs/heads/*");
    let two_remotes = |case: crate::Case| {
        case.config("remote.origin.url", "https://example.com/a.git")
            .config("remote.backup.url", "/srv/backup.git")
            .config("remote.backup.mirror", "true")
    };
    check(&[
        (forced(git(&["push"])), "force-push"),
        (forced(git(&["push", "origin"])), "force-push"),
        (forced(git(&["push", "--repo=origin"])), "force-push"),
        // An explicit refspec replaces the configured ones.
        (forced(git(&["push", "origin", "main"])), "run"),
        (forced(git(&["push", "--all", "origin"])), "run"),
        (forced(git(&["push", "elsewhere"])), "run"),
        (git(&["push"]).config("remote.origin.push", "refs/heads/main:refs/heads/main"), "run"),
        (git(&["push"]).config("remote.origin.push", ":refs/heads/old"), "branch-delete"),
        (git(&["push"]).config("remote.origin.mirror", "true"), "mirror-push"),
        // Mirroring applies whatever the refspecs.
        (git(&["push", "origin", "main"]).config("remote.origin.mirror", "true"), "mirror-push"),
        (git(&["push"]).config("remote.origin.mirror", "false"), "run"),
        (two_remotes(git(&["push", "backup"])), "mirror-push"),
        (two_remotes(git(&["push"])), "run"),
        (two_remotes(git(&["push"])).config("remote.pushdefault", "backup"), "mirror-push"),
        (two_remotes(git(&["push"])).config("branch.main.pushremote", "backup"), "mirror-push"),
        (two_remotes(git(&["push"])).config("branch.feat.x.remote", "backup"), "mirror-push"),
        // With a single configured remote, a bare `git push` goes there.
        (git(&["push"]).config("remote.backup.mirror", "true"), "mirror-push"),
        (
            git(&["push"])
                .config("remote.upstream.url", "https://example.com/u.git")
                .config("remote.upstream.push", "+refs/heads/*:refs/heads/*"),
            "force-push",
        ),
    ]);
}

#[test]
fn send_pack_and_other_direct_transports_are_refused() {
    check_args(&[
        (&["send-pack", "../remote.git", "main"], "plumbing-push"),
        (&["send-pack", "--force", "../remote.git", "+main"], "plumbing-push"),
        (&["http-push", "https://example.com/r.git", "main"], "plumbing-push"),
        (&["remote-https", "origin", "https://example.com/r.git"], "plumbing-push"),
        (&["remote-ext", "origin", "ext::sh -c x"], "plumbing-push"),
        (&["fetch", "origin"], "run"),
        (&["ls-remote", "origin"], "run"),
    ]);
}
