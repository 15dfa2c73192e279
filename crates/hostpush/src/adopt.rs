//! `agent-sandbox git adopt BRANCH`, on the host: takes a branch tip a container's
//! broker refused (its checks failed; `home::keep_refused` kept it under
//! `refs/agent-sandbox/refused/heads/BRANCH` with what the checks said), after the user
//! has seen why. Without `--yes` it only shows; with it, the branch moves there by a
//! fast-forward (a merge `--ff-only` when it is checked out, so the work tree follows).
//! The user's own git in the user's own repository: the agent cannot write it.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use crate::home::{REFUSED_DIR, REFUSED_REFS};

fn git(repo: &Path, args: &[&str]) -> Result<String, String> {
    let out =
        Command::new("git").arg("-C").arg(repo).args(args).output().map_err(|err| format!("cannot run git: {err}"))?;
    if !out.status.success() {
        return Err(format!("`git {}`: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Adopts `branch` (a name under `refs/heads/`, or the whole ref) in the repository at
/// `repo`; `yes` takes it, else only what would be taken and why it was refused. The
/// lines to print.
pub fn adopt(repo: &Path, branch: &str, yes: bool) -> Result<Vec<String>, String> {
    let name = branch.strip_prefix("refs/heads/").unwrap_or(branch);
    let local = format!("refs/heads/{name}");
    let refused = format!("{REFUSED_REFS}heads/{name}");
    let tip = git(repo, &["rev-parse", "-q", "--verify", &format!("{refused}^{{commit}}")])
        .map_err(|_| format!("nothing refused is kept as {name} (`git for-each-ref {REFUSED_REFS}` lists what is)"))?;
    let git_dir = PathBuf::from(git(repo, &["rev-parse", "--path-format=absolute", "--git-common-dir"])?);
    let why = util::fs::read_regular_nofollow(&git_dir.join(REFUSED_DIR).join("heads").join(name), 1 << 20)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_else(|_| "(what the checks said was not kept)".to_owned());
    let current = git(repo, &["rev-parse", "-q", "--verify", &local]).ok();
    let range = match &current {
        Some(current) => format!("{current}..{tip}"),
        None => tip.clone(),
    };
    let log = git(repo, &["log", "--format=%h %s", &range])?;
    let mut lines = vec![format!("{name} was refused by its checks, which said:")];
    lines.extend(why.lines().map(|line| format!("  {}", util::terminal_safe(line))));
    lines.push(format!("taking it brings these commits onto {name}:"));
    lines.extend(log.lines().map(|line| format!("  {}", util::terminal_safe(line))));
    if let Some(current) = &current {
        if git(repo, &["merge-base", "--is-ancestor", current, &tip]).is_err() {
            return Err(format!(
                "{name} moved since the refusal, so taking it would drop commits: look at {refused} and merge it \
                 yourself"
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
