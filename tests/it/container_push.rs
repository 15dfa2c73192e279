//! End to end: pushes from a dev container with `git.verifiedPush` (the real
//! `@devcontainers/cli`, a real engine, the template on `agent-sandbox-base`). Two
//! remotes: a bare repository in the container only root can write, and one behind an
//! sshd in a container of the test's own network, reached through the firewall's proxy
//! with root's key (the sshd runs the host's own OpenSSH, mounted read-only). Root (the
//! verifier, through the image's one sudo rule) holds the only credentials. Every
//! attack a capable agent has on the push (a failing commit on the branch, a new branch
//! or a tag of a tree, an edited check, a scratch clone, another git directory,
//! borrowed objects, its own git straight to either remote, root's key, the verifier's
//! files and sudo rule) must leave the remotes as they were, beside the legitimate
//! pushes (a new branch, `main` with `-u`, a tag, over ssh).

use std::{path::Path, process::Command, time::Instant};

use crate::devcontainer::{check, chown_for_container, docker, git, Cleanup, Devcontainer};

/// An sshd for `root` accepting `client_key.pub`, serving `/srv/remote.git`, in a
/// container on `network`: the plain Debian image with the host's own `/usr` (OpenSSH
/// and git) mounted read-only over its own. Waits until it listens.
fn start_sshd(name: &str, network: &str, dir: &Path) {
    let keygen = |file: &str| {
        let out = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", file, "-f"])
            .arg(dir.join(file))
            .output()
            .expect("ssh-keygen (openssh-client)");
        assert!(out.status.success(), "ssh-keygen: {}", String::from_utf8_lossy(&out.stderr));
    };
    keygen("host_key");
    keygen("client_key");
    std::fs::write(
        dir.join("sshd_config"),
        "Port 22\nHostKey /ssh/host_key\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n\
         KbdInteractiveAuthentication no\nUsePAM no\nPidFile none\nAuthorizedKeysFile /root/.ssh/authorized_keys\n",
    )
    .expect("write");
    let mount = format!("{}:/ssh:ro", dir.display());
    let script = "useradd -r -d /run/sshd -s /usr/sbin/nologin sshd; mkdir -p /run/sshd /root/.ssh\n\
                  cp /ssh/client_key.pub /root/.ssh/authorized_keys; chmod 700 /root/.ssh\n\
                  git init -q --bare /srv/remote.git && exec /usr/sbin/sshd -D -e -f /ssh/sshd_config";
    let out = Command::new("docker")
        .args(["run", "-d", "--name", name, "--hostname", name, "--network", network, "-v", "/usr:/usr:ro", "-v"])
        .args([mount.as_str(), "--entrypoint", "sh", crate::devcontainer::PLAIN_IMAGE, "-c", script])
        .output()
        .expect("docker run");
    assert!(out.status.success(), "sshd container: {}", String::from_utf8_lossy(&out.stderr));
    for _ in 0..120 {
        let logs = Command::new("docker").args(["logs", name]).output().expect("docker logs");
        if String::from_utf8_lossy(&logs.stderr).contains("Server listening") {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    panic!("the sshd did not start: {}", docker(&["logs", name]));
}

/// The project's check (protected): runs the project's own scripts, then refuses `FAIL`.
const CHECK: &str = "#!/bin/sh\nfor f in src/*.sh; do sh \"$f\" || exit 1; done\n! grep -rq FAIL src\n";
/// Code of the agent's that every check runs: who runs it, and what it can read.
const PROBE: &str = "id -un > /tmp/check-user\ncat /root/.ssh/id_ed25519 > /tmp/stolen 2>/dev/null\ntrue\n";

/// Runs `script` as root in `container`; its stdout.
pub(crate) fn as_root(container: &str, script: &str) -> String {
    let out = std::process::Command::new("docker")
        .args(["exec", "-u", "root", container, "sh", "-c", script])
        .output()
        .expect("docker exec");
    assert!(out.status.success(), "{script}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_containers_push_leaves_only_once_root_has_verified_it() {
    let Some(tag) = crate::support::e2e_base_tag("the container push end-to-end test") else { return };
    let started = Instant::now();
    let cli = std::env::var("AGENT_SANDBOX_DEVCONTAINER_CLI").expect("xtask sets the devcontainer CLI path");
    let world = tempfile::tempdir().expect("tempdir");
    let project = Devcontainer { cli: &cli, repo: world.path().join("pushed") };
    let repo = &project.repo;
    let id = std::process::id();
    let subnet = format!("172.30.{}", 16 + id % 200);
    let network = format!("as-push-{id}");
    let sshd = format!("as-push-ssh-{id}");
    let _cleanup = Cleanup {
        workspaces: vec![repo.clone()],
        containers: vec![sshd.clone()],
        network: network.clone(),
        images: Vec::new(),
    };
    let out = Command::new("docker")
        .args(["network", "create", "--subnet", &format!("{subnet}.0/24"), &network])
        .output()
        .expect("docker");
    assert!(out.status.success(), "network: {}", String::from_utf8_lossy(&out.stderr));
    let ssh_dir = world.path().join("ssh");
    std::fs::create_dir(&ssh_dir).expect("mkdir");
    start_sshd(&sshd, &network, &ssh_dir);
    std::fs::create_dir_all(repo.join("src")).expect("mkdir");
    std::fs::create_dir_all(repo.join(".agent-sandbox")).expect("mkdir");
    git(repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("check.sh"), CHECK).expect("write");
    std::fs::write(repo.join("src/probe.sh"), PROBE).expect("write");
    std::fs::write(repo.join("src/a.txt"), "ok\n").expect("write");
    std::fs::write(
        repo.join(".agent-sandbox/config.jsonc"),
        format!(
            "{{\"git\": {{\"verifiedPush\": true}},\n \"checks\": {{\"commands\": [\"sh check.sh\"], \
             \"protectedPaths\": [\"check.sh\"]}},\n \"network\": {{\"allow\": [\"{sshd}:22\"], \
             \"allowPrivate\": [\"{subnet}.0/24\"]}}}}\n"
        ),
    )
    .expect("write");
    git(repo, &["add", "."]);
    git(repo, &["-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-q", "-m", "init"]);
    git(repo, &["remote", "add", "origin", "/srv/remote.git"]);
    git(repo, &["remote", "add", "ssh", &format!("ssh://root@{sshd}/srv/remote.git")]);
    project.init(&["--base-tag", &tag]);
    let json_path = repo.join(".devcontainer/devcontainer.json");
    let generated = std::fs::read_to_string(&json_path).expect("generated");
    let edited = generated.replacen("{\n", &format!("{{\n  \"runArgs\": [\"--network={network}\"],\n"), 1);
    std::fs::write(&json_path, edited).expect("edit");
    git(repo, &["add", "."]);
    git(repo, &["-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-q", "-m", "dev container"]);
    chown_for_container(repo);
    let (ok, up_text) = project.up(&[]);
    assert!(ok, "devcontainer up: {up_text}");
    let container = project.container();
    // The remotes and root's credentials, made by root where the agent cannot write:
    // root's ssh key and the sshd's host key, and the local bare repository.
    let host_key = std::fs::read_to_string(ssh_dir.join("host_key.pub")).expect("host key");
    let client_key = std::fs::read_to_string(ssh_dir.join("client_key")).expect("client key");
    as_root(
        &container,
        &format!(
            "set -e; mkdir -p /root/.ssh; chmod 700 /root/.ssh\n\
             printf '%s' '{client_key}' > /root/.ssh/id_ed25519; chmod 600 /root/.ssh/id_ed25519\n\
             echo '{sshd} {host_key}' > /root/.ssh/known_hosts"
        ),
    );
    as_root(
        &container,
        &format!(
            "set -e; G=/usr/libexec/agent-sandbox/git; $G init -q --bare /srv/remote.git\n\
             $G --git-dir=/srv/remote.git fetch -q --upload-pack=\"$G -c safe.directory='*' upload-pack\" \
               /var/lib/agent-sandbox/home/git main:main\n\
             $G --git-dir=/srv/remote.git push -q ssh://root@{sshd}/srv/remote.git main"
        ),
    );
    let (got, all) = project.exec(
        r#"
        W=$PWD
        git config --global user.name agent; git config --global user.email agent@t.invalid
        git switch -q -c topic && echo ok2 > src/b.txt && git add . && git commit -qm pass1
        git push origin topic >/tmp/o1 2>&1; say push_topic $?
        git switch -q main && echo ok3 > src/c.txt && git add . && git commit -qm pass2
        git push -u origin main >/tmp/o2 2>&1; say push_main $?
        git tag v1 && git push origin v1 >/tmp/o3 2>&1; say push_tag $?
        git push ssh main >/tmp/s1 2>&1; say ssh_push_main $?
        say check_user "$(cat /tmp/check-user 2>/dev/null)"
        say stolen "$(wc -c < /tmp/stolen 2>/dev/null)"

        echo FAIL > src/bad.txt && git add . && git commit -qm bad
        git push origin main >/tmp/o4 2>&1; say push_failing $?
        say failing_why "$(grep -c 'the check `sh check.sh` failed' /tmp/o4)"
        git push origin HEAD:refs/heads/sneaky >/tmp/o5 2>&1; say push_new_branch $?
        git push ssh main >/tmp/s2 2>&1; say ssh_push_failing $?
        GIT_SSH_COMMAND='ssh -o StrictHostKeyChecking=no -o BatchMode=yes' /usr/libexec/agent-sandbox/git push ssh \
          HEAD:refs/heads/direct >/tmp/s3 2>&1; say ssh_direct_refused "$([ $? -ne 0 ] && echo yes)"
        cat /root/.ssh/id_ed25519 >/dev/null 2>&1; say read_key $?
        G=/usr/libexec/agent-sandbox/git
        $G -c safe.directory='*' push --receive-pack="$G -c safe.directory='*' receive-pack" origin \
          HEAD:refs/heads/direct >/tmp/o6 2>&1; say push_direct_refused "$([ $? -ne 0 ] && echo yes)"
        git reset -q --hard HEAD~1

        git clone -q "$W" /tmp/e && cd /tmp/e && printf 'exit 0\n' > check.sh && echo FAIL > src/bad.txt
        git add . && git commit -qm edit-check && cd "$W" && git fetch -q /tmp/e HEAD:refs/heads/evil
        git push origin evil >/tmp/o7 2>&1; say push_edited_check $?
        say edited_check_why "$(grep -c 'check.sh, which is protected' /tmp/o7)"

        git clone -q "$W" /tmp/s && cd /tmp/s && echo FAIL > src/bad.txt && git add . && git commit -qm scratch
        git push /srv/remote.git HEAD:refs/heads/scratch >/tmp/o8 2>&1; say push_scratch $?
        say scratch_why "$(grep -c 'only from the project' /tmp/o8)"
        cd "$W"
        git --git-dir=/tmp/s/.git push origin HEAD:refs/heads/scratch2 >/tmp/o9 2>&1; say push_git_dir $?
        echo /tmp/s/.git/objects > .git/objects/info/alternates
        git push origin HEAD:refs/heads/borrowed >/tmp/o10 2>&1; say push_alternates $?
        echo /var/lib/agent-sandbox/user-objects > .git/objects/info/alternates
        git tag treetag 'HEAD^{tree}' && git push origin treetag >/tmp/o11 2>&1; say push_tree_tag $?

        touch /var/lib/agent-sandbox/push/planted 2>/dev/null; say write_state $?
        sudo -n /usr/local/bin/agent-sandbox push-verify </dev/null >/tmp/o12 2>&1; say empty_request $?
        sudo -n /usr/local/bin/agent-sandbox push-verify origin </dev/null >/dev/null 2>&1; say sudo_other_args $?
        say test_row "$(agent-sandbox test --json | jq -r '.rows[] | select(.guarantee == "pushes checked by root before they leave") | .result')"
        say stolen_after "$(wc -c < /tmp/stolen 2>/dev/null)"
        for f in /tmp/o* /tmp/s[0-9]; do echo "== $f"; cat "$f"; done
        "#,
    );
    check(
        "pushes through the verifier",
        &got,
        &[
            ("push_topic", "0"),
            ("push_main", "0"),
            ("push_tag", "0"),
            ("ssh_push_main", "0"),
            ("ssh_push_failing", "1"),
            ("ssh_direct_refused", "yes"),
            ("read_key", "1"),
            ("check_user", "agent-sandbox-check"),
            ("stolen", "0"),
            ("push_failing", "1"),
            ("failing_why", "1"),
            ("push_new_branch", "1"),
            ("push_direct_refused", "yes"),
            ("push_edited_check", "1"),
            ("edited_check_why", "1"),
            ("push_scratch", "1"),
            ("scratch_why", "1"),
            ("push_git_dir", "1"),
            ("push_alternates", "1"),
            ("push_tree_tag", "1"),
            ("write_state", "1"),
            ("empty_request", "1"),
            ("sudo_other_args", "1"),
            ("stolen_after", "0"),
            ("test_row", "held"),
        ],
        &all,
    );
    let refs = as_root(
        &container,
        "G=/usr/libexec/agent-sandbox/git; $G --git-dir=/srv/remote.git for-each-ref --format='%(refname) %(subject)'",
    );
    assert_eq!(
        refs.lines().collect::<Vec<_>>(),
        ["refs/heads/main pass2", "refs/heads/topic pass1", "refs/tags/v1 pass2"],
        "only the verified pushes reached the remote\n{all}"
    );
    let out = Command::new("docker")
        .args(["exec", &sshd, "git", "--git-dir=/srv/remote.git", "for-each-ref", "--format=%(refname) %(subject)"])
        .output()
        .expect("docker exec");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().collect::<Vec<_>>(),
        ["refs/heads/main pass2"],
        "only the verified push reached the ssh remote\n{all}"
    );

    // While the checks run, the agent plants a filter for the next commit's checkout
    // (which root's git makes) in `.git/config`, and tries to move `.git` away: `.git` is
    // the session repository, a mount point, and its config is the agent's own; root's
    // git reads only its copy of the user's configuration, which the agent cannot reach.
    let (got, all) = project.exec(
        r#"
        git config --global user.name agent; git config --global user.email agent@t.invalid
        say git_row "$(agent-sandbox test --json | jq -r '.rows[] | select(.guarantee | startswith("your .git out of reach")) | .result')"
        printf 'touch /tmp/checks-running; sleep 4\n' > src/slow.sh && git add . && git commit -qm slow
        printf '*.txt filter=evil\n' > .gitattributes && echo ok > src/d.txt && git add . && git commit -qm attributes
        (   for i in $(seq 600); do [ -e /tmp/checks-running ] && break; sleep 0.1; done
            mv .git .git-away 2>/dev/null; say renamed $?
            printf '[filter "evil"]\n\tsmudge = touch /tmp/pwned; cat\n' >> .git/config; say planted $?
        ) > /tmp/race 2>&1 &
        git push origin HEAD:refs/heads/raced >/tmp/r1 2>&1; say raced_push $?
        wait; cat /tmp/race /tmp/r1
        say pwned "$(stat -c %U /tmp/pwned 2>/dev/null)"
        "#,
    );
    check(
        "the config changed while the checks run",
        &got,
        &[("git_row", "held"), ("renamed", "1"), ("planted", "0"), ("raced_push", "0"), ("pwned", "")],
        &all,
    );
    eprintln!("container push e2e took {:?}", started.elapsed());
}
