use super::*;

fn refs(pairs: &[(&str, &str)]) -> Refs {
    pairs.iter().map(|(name, sha)| ((*name).to_owned(), (*sha).to_owned())).collect()
}

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
    let state = |source: &str| {
        Path::new(CONTAINER_HOME_GIT)
            .join(CONTAINER_STATES)
            .join(format!("{:016x}.json", util::fnv1a(source.as_bytes())))
    };
    let bind = Layout {
        top: "/workspaces/p".into(),
        session: "/workspaces/p/.git".into(),
        shared_tree: true,
        state: state("/var/lib/docker/volumes/agent-sandbox-git-1/_data"),
    };
    assert_eq!(got, Some(bind));
    // The state is named by the session's volume: another volume at the same path (a
    // re-created container) is another session.
    let other = mountinfo.replace("agent-sandbox-git-1", "agent-sandbox-git-2");
    let other = layout(&util::mounts::parse(&other)).expect("a layout");
    assert_eq!(other.state, state("/var/lib/docker/volumes/agent-sandbox-git-2/_data"));
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
    let shelf = Layout {
        top: "/repo-shelf/repo".into(),
        session: "/repo-shelf/repo/.git".into(),
        shared_tree: false,
        state: state("/var/lib/docker/volumes/agent-sbx-repo-1/_data/repo/.git"),
    };
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

/// A line already told is not told again (each sync judges a waiting tip the same way);
/// a new one is numbered on from the last.
#[test]
fn a_line_is_told_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("told");
    let waits = "main did not come home (moved meanwhile): abc".to_owned();
    std::fs::write(&path, told_after(&path, &[waits.clone(), waits.clone()])).expect("write");
    std::fs::write(&path, told_after(&path, &[waits.clone(), "main is now def".into()])).expect("write");
    let told = parse_told(&std::fs::read(&path).expect("read"));
    let texts: Vec<(u64, &str)> = told.iter().map(|told| (told.seq, told.text.as_str())).collect();
    assert_eq!(texts, [(1, waits.as_str()), (2, "main is now def")]);
}

/// Two sessions put aside in one second (a re-clone, then another) both stay, under
/// names of their own; found by the soak.
#[test]
fn sessions_put_aside_in_one_second_keep_a_name_each() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut asides = Vec::new();
    for content in ["first", "second"] {
        let top = dir.path().join("home");
        std::fs::create_dir_all(&top).expect("mkdir");
        std::fs::write(top.join("file"), content).expect("write");
        asides.push(sessions::put_aside(&top).expect("put aside"));
    }
    assert_ne!(asides[0], asides[1]);
    for (aside, content) in asides.iter().zip(["first", "second"]) {
        assert_eq!(std::fs::read_to_string(aside.join("file")).expect("kept"), content);
    }
}
