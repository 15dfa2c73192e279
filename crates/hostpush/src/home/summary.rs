//! What `exec` says when the command has ended: one short summary of the session's
//! sync, made from what the broker told during it and from the tips still kept in the
//! user's repository, with the command to act on each.

use std::collections::BTreeMap;

/// The summary's lines. `told`: everything the broker told this session, in order;
/// `kept`: `git adopt`'s listing of the tips kept in the user's repository now
/// ([`crate::adopt::list`]), which names the command that takes them.
pub fn summary(told: &[String], kept: &[String]) -> Vec<String> {
    let mut home: BTreeMap<&str, &str> = BTreeMap::new();
    let mut deleted = Vec::new();
    let mut stashed = 0;
    let mut waits: BTreeMap<&str, &str> = BTreeMap::new();
    let mut other = Vec::new();
    for line in told {
        if let Some((name, rest)) = line.split_once(" is now ") {
            if let Some(sha) = rest.strip_suffix(" in the user's repository") {
                home.insert(name, sha);
                deleted.retain(|gone| gone != &name);
                continue;
            }
        }
        if let Some(name) = line.strip_suffix(" was deleted in the user's repository") {
            home.remove(name);
            deleted.push(name);
            continue;
        }
        if line.starts_with("the session's stash entry ") && line.contains(" is in the user's stash too") {
            stashed += 1;
            continue;
        }
        if let Some((name, why)) = line.split_once(" did not come home (") {
            waits.insert(name, why.rsplit_once("); it waits as").map_or(why, |(why, _)| why));
            continue;
        }
        if !other.contains(line) {
            other.push(line.clone());
        }
    }
    let mut lines = Vec::new();
    if !home.is_empty() {
        let list: Vec<String> = home.iter().map(|(name, sha)| format!("{name} at {sha}")).collect();
        lines.push(format!("came home: {}", list.join(", ")));
    }
    if !deleted.is_empty() {
        lines.push(format!("deleted in your repository, as in the session: {}", deleted.join(", ")));
    }
    if stashed > 0 {
        lines.push(format!(
            "the session's stash: {stashed} {} your stash now (`git stash list` shows, `git stash apply` takes back)",
            if stashed == 1 { "entry in" } else { "entries in" }
        ));
    }
    // Only the tips still kept: one adopted, or gone since, is no longer news.
    let still_kept = kept.iter().any(|line| line.contains("(waiting") || line.contains("(refused"));
    if still_kept {
        lines.push("kept in your repository, not on your branches:".into());
        for line in kept {
            let name = line.split(' ').next().unwrap_or_default();
            match waits.get(name) {
                Some(why) if line.contains("(waiting") => lines.push(format!("  {line}: {why}")),
                _ => lines.push(format!("  {line}")),
            }
        }
    }
    lines.extend(other);
    if lines.is_empty() {
        lines.push("nothing was committed in the session".into());
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::summary;

    fn strings(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|line| (*line).to_owned()).collect()
    }

    #[test]
    fn what_came_home_what_waits_and_the_stash_in_a_few_lines() {
        let told = strings(&[
            "main is now 111111111111 in the user's repository",
            "main did not come home (the branch moved in the user's repository meanwhile, to 2222: `git rebase --autostash 2222`); it waits as refs/agent-sandbox/waiting/heads/main",
            "topic is now 333333333333 in the user's repository",
            "topic is now 444444444444 in the user's repository",
            "spike was deleted in the user's repository",
            "the session's stash entry 555555555555 (\"wip\") is in the user's stash too: on the host, `git stash list` shows it and `git stash apply` takes it back",
            "the user's checkout follows the session to topic",
            "the user's checkout follows the session to topic",
        ]);
        let kept = strings(&[
            "main 666666666666 (waiting, not in main)",
            "`agent-sandbox git adopt BRANCH` shows one, `--yes` takes it",
        ]);
        assert_eq!(
            summary(&told, &kept),
            strings(&[
                "came home: main at 111111111111, topic at 444444444444",
                "deleted in your repository, as in the session: spike",
                "the session's stash: 1 entry in your stash now (`git stash list` shows, `git stash apply` takes back)",
                "kept in your repository, not on your branches:",
                "  main 666666666666 (waiting, not in main): the branch moved in the user's repository meanwhile, to 2222: `git rebase --autostash 2222`",
                "  `agent-sandbox git adopt BRANCH` shows one, `--yes` takes it",
                "the user's checkout follows the session to topic",
            ])
        );
        let nothing =
            ["no branch tip is kept: everything the sessions committed came home or stays in them".to_owned()];
        assert_eq!(summary(&[], &nothing), ["nothing was committed in the session"]);
    }
}
