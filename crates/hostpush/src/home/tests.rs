use super::*;

fn refs(pairs: &[(&str, &str)]) -> Refs {
    pairs.iter().map(|(name, sha)| ((*name).to_owned(), (*sha).to_owned())).collect()
}

fn update(name: &str, from: Option<&str>, to: &str) -> Decision {
    Decision::Update { name: name.into(), from: from.map(str::to_owned), to: to.into() }
}

fn waits(decision: &Decision, name: &str, tip: &str, why: &str) -> bool {
    matches!(decision, Decision::Wait { name: n, tip: t, why: w } if n == name && t == tip && w.contains(why))
}

/// Every case of one ref: fast-forwards and new refs come home, rewrites only of the
/// session's own commits, deletions only of the session's own refs; whatever the user
/// moved or owned before waits, and refs outside heads and tags are not brought.
#[test]
fn each_ref_comes_home_waits_or_stays() {
    let start = refs(&[("refs/heads/main", "a1"), ("refs/heads/old", "o1"), ("refs/tags/v1", "t1")]);
    let state = State { start: start.clone(), known: start.clone(), ..State::default() };
    let lineage = |theirs: &str, ours: &str| match (theirs, ours) {
        ("a1", "a2") => Lineage::FastForward,
        ("a1", "r2") => Lineage::RewritesOthers,
        ("m9", "a2") => Lineage::RewritesOthers,
        ("m9", "a1") => Lineage::Behind,
        ("m9", "m10") => Lineage::FastForward,
        _ => Lineage::RewritesOwn,
    };
    type Pairs<'a> = &'a [(&'a str, &'a str)];
    type Expect<'a> = &'a dyn Fn(&[Decision]) -> bool;
    let cases: &[(Pairs, Pairs, Expect)] = &[
        // A commit on the checked-out branch: a fast-forward.
        (&[("refs/heads/main", "a1")], &[("refs/heads/main", "a2")], &|d| {
            d == [update("refs/heads/main", Some("a1"), "a2")]
        }),
        // A new branch and a new tag come home; the stash and remote-tracking refs do not.
        (
            &[],
            &[("refs/heads/f", "f1"), ("refs/tags/v2", "t2"), ("refs/stash", "s1"), ("refs/remotes/origin/x", "x")],
            &|d| d == [update("refs/heads/f", None, "f1"), update("refs/tags/v2", None, "t2")],
        ),
        // A rewrite of history the user had: waits, told onto what to rebase.
        (&[("refs/heads/main", "a1")], &[("refs/heads/main", "r2")], &|d| {
            d.len() == 1 && waits(&d[0], "refs/heads/main", "r2", "not made in this session: `git rebase a1`")
        }),
        // The user committed meanwhile: the session's tip waits, told to rebase.
        (&[("refs/heads/main", "m9")], &[("refs/heads/main", "a2")], &|d| {
            d.len() == 1 && waits(&d[0], "refs/heads/main", "a2", "git rebase m9")
        }),
        // ... and comes home once it contains the user's commits.
        (&[("refs/heads/main", "m9")], &[("refs/heads/main", "m10")], &|d| {
            d == [update("refs/heads/main", Some("m9"), "m10")]
        }),
        // A tag that existed is never moved; a branch that existed is never deleted.
        (&[("refs/tags/v1", "t1"), ("refs/heads/old", "o1")], &[("refs/tags/v1", "t9")], &|d| {
            d.len() == 1 && waits(&d[0], "refs/tags/v1", "t9", "not moved")
        }),
        // A branch the user deleted meanwhile is not made again.
        (&[], &[("refs/heads/old", "o2")], &|d| d.len() == 1 && waits(&d[0], "refs/heads/old", "o2", "deleted")),
        // The user went on while the session left the branch as it was: nothing to bring.
        (&[("refs/heads/main", "m9")], &[("refs/heads/main", "a1")], &|d| d.is_empty()),
        // Nothing changed.
        (&[("refs/heads/main", "a1")], &[("refs/heads/main", "a1")], &|d| d.is_empty()),
    ];
    for (user, session, expected) in cases {
        let got = decide(&state, &refs(user), &refs(session), &[], &lineage);
        assert!(expected(&got), "user {user:?} session {session:?}: {got:?}");
    }
}

/// A branch this session created and brought home may be deleted, or rewritten when
/// only its own commits go; once the user moved it, neither.
#[test]
fn the_sessions_own_refs_may_be_rewritten_and_deleted() {
    let start = refs(&[("refs/heads/main", "a1")]);
    let known = refs(&[("refs/heads/main", "a1"), ("refs/heads/f", "f1")]);
    let state = State { start, known, brought: ["f1".to_owned()].into(), ..State::default() };
    let own = |_: &str, _: &str| Lineage::RewritesOwn;
    let user = refs(&[("refs/heads/main", "a1"), ("refs/heads/f", "f1")]);
    let deleted = decide(&state, &user, &refs(&[("refs/heads/main", "a1")]), &[], &own);
    assert_eq!(deleted, [Decision::Delete { name: "refs/heads/f".into(), from: "f1".into() }]);
    let amended = decide(&state, &user, &refs(&[("refs/heads/main", "a1"), ("refs/heads/f", "f2")]), &[], &own);
    assert_eq!(amended, [update("refs/heads/f", Some("f1"), "f2")]);
    let moved = refs(&[("refs/heads/main", "a1"), ("refs/heads/f", "u5")]);
    assert!(decide(&state, &moved, &refs(&[("refs/heads/main", "a1")]), &[], &own).is_empty());
}

/// In branch mode the user's checked-out branch never moves: its work tree is not the
/// session's. Other branches come home; a shelf branch behind the user's says nothing.
#[test]
fn the_users_checked_out_branch_stays_in_branch_mode() {
    let start = refs(&[("refs/heads/main", "a1")]);
    let state = State { start: start.clone(), known: start, ..State::default() };
    let lineage = |theirs: &str, ours: &str| match (theirs, ours) {
        ("a1", "a2") => Lineage::FastForward,
        _ => Lineage::Behind,
    };
    let user = refs(&[("refs/heads/main", "a1")]);
    let session = refs(&[("refs/heads/main", "a2"), ("refs/heads/feat", "f1")]);
    let got = decide(&state, &user, &session, &["refs/heads/main".to_owned()], &lineage);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0], update("refs/heads/feat", None, "f1"));
    assert!(waits(&got[1], "refs/heads/main", "a2", "checked out"), "{got:?}");
    let behind = refs(&[("refs/heads/main", "a0")]);
    assert!(decide(&state, &user, &behind, &["refs/heads/main".to_owned()], &lineage).is_empty());
}

/// The work tree is the mount whose root is the parent of the user's `.git` (mounted
/// for the broker), on the same device, with a mount of its own at `.git`.
#[test]
fn the_layout_is_read_from_the_mounts() {
    let mountinfo = "\
22 1 0:21 / / rw,relatime - overlay overlay rw
30 22 8:1 /home/u/p /workspaces/p rw,relatime - ext4 /dev/sda1 rw
31 30 8:1 /var/lib/docker/volumes/agent-sandbox-git-1/_data /workspaces/p/.git rw,relatime - ext4 /dev/sda1 rw
32 22 8:1 /home/u/p/.git /var/lib/agent-sandbox/home/git rw,relatime - ext4 /dev/sda1 rw
33 22 8:1 /home/u/p/.git/objects /var/lib/agent-sandbox/user-objects ro,relatime - ext4 /dev/sda1 rw
34 22 8:2 /home/u/p /elsewhere rw,relatime - ext4 /dev/sdb1 rw";
    let got = layout(&util::mounts::parse(mountinfo));
    let bind = Layout { top: "/workspaces/p".into(), session: "/workspaces/p/.git".into(), shared_tree: true };
    assert_eq!(got, Some(bind));
    let without_session = mountinfo.lines().filter(|line| !line.starts_with("31 ")).collect::<Vec<_>>().join("\n");
    assert_eq!(layout(&util::mounts::parse(&without_session)), None);
    let without_home = mountinfo.lines().filter(|line| !line.starts_with("32 ")).collect::<Vec<_>>().join("\n");
    assert_eq!(layout(&util::mounts::parse(&without_home)), None);
    // A branch sandbox: the checkout read-only, the shelf beside it.
    let branch = "\
22 1 0:21 / / rw,relatime - overlay overlay rw
30 22 8:1 /home/u/p /workspace/p ro,relatime - ext4 /dev/sda1 rw
32 22 8:1 /home/u/p/.git /var/lib/agent-sandbox/home/git rw,relatime - ext4 /dev/sda1 rw
35 22 8:1 /var/lib/docker/volumes/agent-sbx-repo-1/_data /repo-shelf rw,relatime - ext4 /dev/sda1 rw";
    let got = layout(&util::mounts::parse(branch));
    let shelf = Layout { top: "/repo-shelf/repo".into(), session: "/repo-shelf/repo/.git".into(), shared_tree: false };
    assert_eq!(got, Some(shelf));
    assert_eq!(layout(&util::mounts::parse(&branch.replace(" ro,relatime", " rw,relatime"))), None);
}

#[test]
fn only_keys_that_run_nothing_are_kept() {
    for key in ["user.name", "remote.origin.url", "remote.origin.fetch", "branch.main.merge", "core.hookspath"] {
        assert!(safe_key(key), "{key}");
    }
    for key in ["core.fsmonitor", "core.sshcommand", "remote.origin.uploadpack", "diff.x.textconv", "include.path"] {
        assert!(!safe_key(key), "{key}");
    }
}

/// The session's refs as its files say, packed and loose (a loose one wins), without
/// symbolic refs; anything that is not a plain file or a name git would make sends the
/// broker to read the session whole instead (`None`).
#[test]
fn session_refs_are_listed_from_plain_files_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let session = dir.path();
    let (a, b, c) = ("a".repeat(40), "b".repeat(40), "c".repeat(40));
    std::fs::write(
        session.join("packed-refs"),
        format!("# pack-refs with: sorted \n{a} refs/heads/main\n{a} refs/tags/v1\n^{b}\n{b} refs/remotes/o/x\n"),
    )
    .expect("packed");
    std::fs::create_dir_all(session.join("refs/heads/feat")).expect("mkdir");
    std::fs::create_dir_all(session.join("refs/tags")).expect("mkdir");
    std::fs::write(session.join("refs/heads/main"), format!("{c}\n")).expect("loose");
    std::fs::write(session.join("refs/heads/feat/one"), format!("{b}\n")).expect("loose");
    std::fs::write(session.join("refs/heads/sym"), "ref: refs/heads/main\n").expect("symbolic");
    let want = refs(&[("refs/heads/feat/one", &b), ("refs/heads/main", &c), ("refs/tags/v1", &a)]);
    assert_eq!(list_session_refs(session), Some(want));

    let odd = |path: &str, make: &dyn Fn(&Path)| {
        let path = session.join(path);
        make(&path);
        let listed = list_session_refs(session);
        let _ = std::fs::remove_file(&path);
        listed
    };
    assert_eq!(odd("refs/heads/link", &|p| std::os::unix::fs::symlink("/etc/passwd", p).expect("ln")), None);
    let fifo = |p: &Path| {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    };
    assert_eq!(odd("refs/heads/fifo", &fifo), None);
    assert_eq!(odd("refs/heads/a..b", &|p| std::fs::write(p, format!("{a}\n")).expect("write")), None);
    assert_eq!(odd("refs/heads/short", &|p| std::fs::write(p, "abc\n").expect("write")), None);
    // A directory walked from that is a link (read_dir would follow it).
    std::fs::rename(session.join("refs/tags"), session.join("tags.away")).expect("mv");
    std::os::unix::fs::symlink(session.join("tags.away"), session.join("refs/tags")).expect("ln");
    assert_eq!(list_session_refs(session), None, "refs/tags a link");
    std::fs::remove_file(session.join("refs/tags")).expect("rm");
    std::fs::create_dir_all(session.join("reftable")).expect("mkdir");
    assert_eq!(list_session_refs(session), None, "reftable: read whole");
}

/// The session's config as git reads it back: the core settings, then each safe entry
/// with its value intact (quotes, backslashes, a subsection with dots and quotes).
#[test]
fn the_session_config_reads_back_as_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let entries: Vec<(String, String)> = [
        ("user.name", "A \"quoted\" name\\"),
        ("remote.my.origin\"x.url", "https://example.invalid/a b.git"),
        ("remote.my.origin\"x.fetch", "+refs/heads/*:refs/remotes/origin/*"),
        ("branch.feat/one.merge", "refs/heads/feat/one"),
        ("core.autocrlf", "input\ttab"),
    ]
    .iter()
    .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
    .collect();
    let file = dir.path().join("config");
    std::fs::write(&file, session_config(&entries)).expect("write");
    let out = Command::new("git").args(["config", "--file"]).arg(&file).args(["--list", "-z"]).output().expect("git");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed: Vec<(String, String)> = String::from_utf8_lossy(&out.stdout)
        .split('\0')
        .filter_map(|entry| entry.split_once('\n'))
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect();
    let core: Vec<&str> = listed.iter().take(4).map(|(key, _)| key.as_str()).collect();
    assert_eq!(core, ["core.repositoryformatversion", "core.filemode", "core.bare", "core.logallrefupdates"]);
    let mut want = entries.clone();
    // git lowercases section and variable names, never the subsection.
    for (key, _) in &mut want {
        if let (Some((section, _)), Some((_, name))) = (key.split_once('.'), key.rsplit_once('.')) {
            let middle = &key[section.len()..key.len() - name.len()];
            *key = format!("{}{middle}{}", section.to_lowercase(), name.to_lowercase());
        }
    }
    assert_eq!(listed[4..], want[..]);
}

/// A kept session takes the user's new branches and tags and the branches it has
/// behind the user's; a branch it moved on, one that diverged, a tag that differs and
/// refs outside heads and tags stay as they are.
#[test]
fn a_kept_session_follows_only_what_it_is_behind() {
    let session = refs(&[
        ("refs/heads/main", "a1"),
        ("refs/heads/ahead", "b2"),
        ("refs/heads/diverged", "c2"),
        ("refs/heads/same", "d1"),
        ("refs/tags/v1", "t1"),
        ("refs/heads/mine", "m1"),
    ]);
    let user = refs(&[
        ("refs/heads/main", "a2"),
        ("refs/heads/ahead", "b1"),
        ("refs/heads/diverged", "c3"),
        ("refs/heads/same", "d1"),
        ("refs/heads/new", "n1"),
        ("refs/tags/v1", "t2"),
        ("refs/tags/v2", "t3"),
        ("refs/remotes/origin/main", "r1"),
    ]);
    let ancestors = [("a1", "a2"), ("b1", "b2")];
    let is_ancestor = |old: &str, new: &str| ancestors.contains(&(old, new));
    let got = refresh_updates(&session, &user, &is_ancestor);
    let update = |name: &str, old: Option<&str>, new: &str| RefUpdate {
        name: name.into(),
        old: old.map(str::to_owned),
        new: new.into(),
    };
    assert_eq!(
        got,
        [
            update("refs/heads/main", Some("a1"), "a2"),
            update("refs/heads/new", None, "n1"),
            update("refs/tags/v2", None, "t3"),
        ]
    );
}
