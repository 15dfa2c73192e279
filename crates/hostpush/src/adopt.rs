//! `agent-sandbox git adopt [BRANCH]`, on the host: lists, shows and takes the branch
//! tips a broker kept in the user's repository: refused ones (their checks failed;
//! `home::keep_refused` kept them under `refs/agent-sandbox/refused/heads/BRANCH` with
//! what the checks said) and waiting ones (both sides moved the branch;
//! `refs/agent-sandbox/waiting/heads/BRANCH`), after the user has seen why. Without
//! `--yes` it only shows; with it, the branch moves there by a fast-forward (a merge
//! `--ff-only` when it is checked out, so the work tree follows). A tip already in the
//! branch is said to be, and its kept ref removed. The user's own git in the user's own
//! repository: the agent cannot write it.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use crate::home::{REFUSED_DIR, REFUSED_REFS, WAITING};

fn git(repo: &Path, args: &[&str]) -> Result<String, String> {
    let out =
        Command::new("git").arg("-C").arg(repo).args(args).output().map_err(|err| format!("cannot run git: {err}"))?;
    if !out.status.success() {
        return Err(format!("`git {}`: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Every kept tip in the repository at `repo`, one line each: the branch, whether it was
/// refused or waits, and whether it is already in the branch.
pub fn list(repo: &Path) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    for (kind, prefix) in [("refused by its checks", REFUSED_REFS), ("waiting", WAITING)] {
        let listed = git(repo, &["for-each-ref", "--format=%(objectname) %(refname)", &format!("{prefix}heads/")])?;
        for (tip, kept) in listed.lines().filter_map(|line| line.split_once(' ')) {
            let name = kept.trim_start_matches(prefix).trim_start_matches("heads/");
            let local = format!("refs/heads/{name}");
            let already = git(repo, &["merge-base", "--is-ancestor", tip, &local]).is_ok();
            let state = if already { format!("already in {name}") } else { format!("not in {name}") };
            lines.push(format!("{} {} ({kind}, {state})", util::terminal_safe(name), &tip[..12.min(tip.len())]));
        }
    }
    if lines.is_empty() {
        lines.push("no branch tip is kept: everything the sessions committed came home or stays in them".into());
    } else {
        lines.push("`agent-sandbox git adopt BRANCH` shows one, `--yes` takes it".into());
    }
    Ok(lines)
}

/// Adopts `branch` (a name under `refs/heads/`, or the whole ref) in the repository at
/// `repo`: its refused tip, else its waiting one; `yes` takes it, else only what would
/// be taken and why it was kept. The lines to print.
pub fn adopt(repo: &Path, branch: &str, yes: bool) -> Result<Vec<String>, String> {
    let name = branch.strip_prefix("refs/heads/").unwrap_or(branch);
    let local = format!("refs/heads/{name}");
    let git_dir = PathBuf::from(git(repo, &["rev-parse", "--path-format=absolute", "--git-common-dir"])?);
    let verify = |kept: &str| git(repo, &["rev-parse", "-q", "--verify", &format!("{kept}^{{commit}}")]).ok();
    let (refused, tip, why) = match verify(&format!("{REFUSED_REFS}heads/{name}")) {
        Some(tip) => {
            let why = util::fs::read_regular_nofollow(&git_dir.join(REFUSED_DIR).join("heads").join(name), 1 << 20)
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                .unwrap_or_else(|_| "(what the checks said was not kept)".to_owned());
            (
                format!("{REFUSED_REFS}heads/{name}"),
                tip,
                format!("{name} was refused by its checks, which said:\n{why}"),
            )
        }
        None => {
            let waiting = format!("{WAITING}heads/{name}");
            let tip = verify(&waiting)
                .ok_or_else(|| format!("no tip of {name} is kept (`agent-sandbox git adopt` lists those that are)"))?;
            (waiting, tip, format!("{name} waits: it passed its checks, but both sides moved the branch"))
        }
    };
    let current = git(repo, &["rev-parse", "-q", "--verify", &local]).ok();
    if let Some(current) = &current {
        if git(repo, &["merge-base", "--is-ancestor", &tip, current]).is_ok() {
            git(repo, &["update-ref", "-d", &refused])?;
            let _ = std::fs::remove_file(git_dir.join(REFUSED_DIR).join("heads").join(name));
            return Ok(vec![format!("{name} already has {}: nothing to take (the kept ref is removed)", &tip[..12])]);
        }
    }
    let range = match &current {
        Some(current) => format!("{current}..{tip}"),
        None => tip.clone(),
    };
    let log = git(repo, &["log", "--format=%h %s", &range])?;
    let mut why = why.lines();
    let mut lines: Vec<String> = why.next().map(|line| util::terminal_safe(line).into_owned()).into_iter().collect();
    lines.extend(why.map(|line| format!("  {}", util::terminal_safe(line))));
    lines.push(format!("taking it brings these commits onto {name}:"));
    lines.extend(log.lines().map(|line| format!("  {}", util::terminal_safe(line))));
    if let Some(current) = &current {
        if git(repo, &["merge-base", "--is-ancestor", current, &tip]).is_err() {
            return Err(format!(
                "{name} moved since, so taking it would drop commits: look at {refused} and merge it yourself \
                 (`git merge {refused}`)"
            ));
        }
    }
    if !yes {
        lines.push(format!("nothing taken: run `agent-sandbox git adopt {name} --yes` to take it"));
        return Ok(lines);
    }
    let checked_out = git(repo, &["symbolic-ref", "-q", "HEAD"]).ok().as_deref() == Some(local.as_str());
    if checked_out {
        git(repo, &["merge", "--ff-only", "-q", &tip])?;
    } else {
        let old = current.clone().unwrap_or_else(|| "0".repeat(40));
        git(repo, &["update-ref", &local, &tip, &old])?;
    }
    git(repo, &["update-ref", "-d", &refused])?;
    let _ = std::fs::remove_file(git_dir.join(REFUSED_DIR).join("heads").join(name));
    lines.push(format!("{name} is now {}", &tip[..12.min(tip.len())]));
    Ok(lines)
}
