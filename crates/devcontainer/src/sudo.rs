//! The agent's user gets no sudo beyond the Feature's own rule. Images built with
//! common-utils (every `mcr.microsoft.com/devcontainers/*` image) grant their user
//! `ALL=(root) NOPASSWD:ALL` in `/etc/sudoers.d/`, and a way to root undoes the
//! firewall and every root-owned guard. The Feature's `install.sh` (as the image is
//! built) and its entrypoint (as root, at every start) run `agent-sandbox sudo-restrict`:
//! [`neutralise`] decides (pure, over the sudoers files' text and the user's groups)
//! which lines to comment out and which groups to leave, [`restrict`] carries it out
//! and then asks sudo itself (`sudo -l -U`), judged by [`beyond_feature`] (which
//! `agent-sandbox test` applies to the agent's own `sudo -n -l`): anything left beyond
//! the Feature's rule is an error, so the build stops with the grant named.

use std::path::{Path, PathBuf};

use crate::Error;

/// The Feature's own sudoers file (install.sh writes it): never neutralised.
pub const SUDOERS_FILE: &str = "/etc/sudoers.d/agent-sandbox";
/// The users the Feature's rule is for (the remote user, and the container user when
/// it is another non-root one), one a line: root-owned, written by install.sh.
pub const USERS_FILE: &str = "/etc/agent-sandbox/agent-users";
/// What a neutralised line starts with (a space after `#`: `#1000` would be a uid).
pub const REMOVED: &str = "# agent-sandbox removed (no sudo beyond the Feature's rule): ";

/// The commands the Feature's sudo rule allows the agent's user, as root, without a
/// password (devcontainer/feature/agent-sandbox/install.sh writes the rule).
pub const FEATURE_SUDO: &[&str] = &[
    "/usr/local/bin/agent-sandbox firewall apply",
    "/usr/local/bin/agent-sandbox firewall status",
    "/usr/local/bin/agent-sandbox firewall start",
    "/usr/local/bin/agent-sandbox push-verify",
    "/usr/local/bin/agent-sandbox git-home start",
    "/usr/local/bin/agent-sandbox git-home sync",
];

/// What `sudo -n -l`'s listing grants beyond [`FEATURE_SUDO`] as root without
/// `SETENV`, and the `Defaults` that would let the caller's environment reach those
/// commands: each as sudo prints it. Empty: nothing beyond the Feature's rules.
pub fn beyond_feature(listing: &str) -> Vec<String> {
    #[derive(PartialEq)]
    enum Section {
        Other,
        Defaults,
        Commands,
    }
    let mut section = Section::Other;
    let mut entries: Vec<String> = Vec::new();
    let mut problems = Vec::new();
    let mut defaults = String::new();
    for line in listing.lines() {
        if !line.starts_with([' ', '\t']) {
            section = if line.starts_with("Matching Defaults entries") {
                Section::Defaults
            } else if line.contains(" may run the following commands") {
                Section::Commands
            } else {
                Section::Other
            };
            continue;
        }
        let text = line.trim();
        match section {
            // sudo wraps long lines (at a space, the rest indented): joined again.
            Section::Defaults => {
                defaults.push(' ');
                defaults.push_str(text);
            }
            Section::Commands if text.starts_with('(') => entries.push(text.to_owned()),
            Section::Commands => match entries.last_mut() {
                Some(entry) => {
                    entry.push(' ');
                    entry.push_str(text);
                }
                None => problems.push(text.to_owned()),
            },
            Section::Other => {}
        }
    }
    for default in defaults.split(", ").map(str::trim) {
        let keeps_loader = default.starts_with("env_keep") && default.contains("LD_");
        if default == "!env_reset" || default == "setenv" || keeps_loader {
            problems.push(format!("Defaults {default}"));
        }
    }
    for entry in entries {
        let (runas, mut rest) = entry.split_once(')').map_or(("", entry.as_str()), |(runas, rest)| (runas, rest));
        let mut setenv = false;
        loop {
            rest = rest.trim_start();
            let Some((tag, after)) = rest.split_once(':') else { break };
            if tag.is_empty() || !tag.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
                break;
            }
            setenv |= tag == "SETENV";
            rest = after;
        }
        let only_feature = rest.split(", ").map(str::trim).all(|command| FEATURE_SUDO.contains(&command));
        if runas.trim_start_matches('(').trim() != "root" || setenv || !only_feature {
            problems.push(entry);
        }
    }
    problems
}

/// Who a user is, as sudoers can name them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub name: String,
    pub uid: u32,
    /// The primary group: a `%group` rule for it cannot be left, so the line goes.
    pub primary: (String, u32),
    /// The supplementary groups (name, gid), which the user can be taken out of.
    pub groups: Vec<(String, u32)>,
}

/// What [`restrict`] changes for one user.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Neutralise {
    /// Per sudoers file, the (0-based) physical lines to comment out.
    pub lines: Vec<(PathBuf, Vec<usize>)>,
    /// Supplementary groups whose `%group` rule grants the user sudo: the user leaves
    /// them (the rule stays for the group's other members).
    pub groups: Vec<String>,
}

/// The lines of `files` (path, text: `/etc/sudoers` and `/etc/sudoers.d/*` but the
/// Feature's own) whose user list names `account` (by name, `#uid`, `ALL`, a
/// `User_Alias` that does, or its primary group), and the supplementary groups named
/// by `%group`. A continued line (`\`) goes whole. Negations (`!user`) are not read:
/// a line that also names `ALL` goes. Defaults are left: [`beyond_feature`] names the
/// ones that matter, and `restrict` then refuses.
pub fn neutralise(files: &[(PathBuf, String)], account: &Account) -> Neutralise {
    let logical: Vec<(&Path, Vec<usize>, String)> = files
        .iter()
        .flat_map(|(path, text)| {
            let mut out = Vec::new();
            let mut current: Option<(Vec<usize>, String)> = None;
            for (idx, line) in text.lines().enumerate() {
                let (mut indexes, mut joined) = current.take().unwrap_or_default();
                indexes.push(idx);
                match line.strip_suffix('\\') {
                    Some(head) => {
                        joined.push_str(head);
                        joined.push(' ');
                        current = Some((indexes, joined));
                    }
                    None => {
                        joined.push_str(line);
                        out.push((path.as_path(), indexes, joined));
                    }
                }
            }
            out.extend(current.map(|(indexes, joined)| (path.as_path(), indexes, joined)));
            out
        })
        .collect();
    let mut aliases: Vec<(String, Vec<String>)> = Vec::new();
    for (_, _, text) in &logical {
        let Some(rest) = text.trim().strip_prefix("User_Alias") else { continue };
        for definition in rest.split(':') {
            if let Some((name, items)) = definition.split_once('=') {
                aliases.push((name.trim().to_owned(), items.split(',').map(|item| item.trim().to_owned()).collect()));
            }
        }
    }
    let mut plan = Neutralise::default();
    for (path, indexes, text) in &logical {
        let text = text.trim();
        let word = text.split_whitespace().next().unwrap_or_default();
        if text.is_empty() || text.starts_with('@') || (text.starts_with('#') && !is_uid(word)) {
            continue;
        }
        if word.starts_with("Defaults") || word.ends_with("_Alias") {
            continue;
        }
        let mut direct = false;
        let mut groups = Vec::new();
        for item in user_list(text) {
            match matches(&item, account, &aliases, 0) {
                Match::No => {}
                Match::Direct => direct = true,
                Match::Group(group) => groups.push(group),
            }
        }
        if direct {
            match plan.lines.iter_mut().find(|(file, _)| file == path) {
                Some((_, lines)) => lines.extend(indexes),
                None => plan.lines.push((path.to_path_buf(), indexes.clone())),
            }
        } else {
            for group in groups {
                if !plan.groups.contains(&group) {
                    plan.groups.push(group);
                }
            }
        }
    }
    plan
}

fn is_uid(word: &str) -> bool {
    word.strip_prefix('#').is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
}

/// A user specification's user list: everything before the first blank that does not
/// follow or precede a comma.
fn user_list(spec: &str) -> Vec<String> {
    let mut list = String::new();
    let mut chars = spec.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_whitespace() {
            while chars.peek().is_some_and(|next| next.is_whitespace()) {
                chars.next();
            }
            if !list.ends_with(',') && chars.peek() != Some(&',') {
                break;
            }
            continue;
        }
        list.push(c);
    }
    list.split(',').map(|item| item.trim().to_owned()).filter(|item| !item.is_empty()).collect()
}

enum Match {
    No,
    Direct,
    Group(String),
}

fn matches(item: &str, account: &Account, aliases: &[(String, Vec<String>)], depth: usize) -> Match {
    if item.starts_with('!') || depth > 8 {
        return Match::No;
    }
    if item == "ALL" || item == account.name || item.strip_prefix('#') == Some(&account.uid.to_string()) {
        return Match::Direct;
    }
    if let Some(group) = item.strip_prefix('%') {
        let is = |(name, gid): &(String, u32)| group == name || group.strip_prefix('#') == Some(&gid.to_string());
        if is(&account.primary) {
            return Match::Direct;
        }
        return match account.groups.iter().find(|entry| is(entry)) {
            Some((name, _)) => Match::Group(name.clone()),
            None => Match::No,
        };
    }
    if let Some((_, items)) = aliases.iter().find(|(name, _)| name == item) {
        let named = items.iter().any(|inner| !matches!(matches(inner, account, aliases, depth + 1), Match::No));
        return if named { Match::Direct } else { Match::No };
    }
    Match::No
}

/// What `restrict` did, a line each; run as root in an image the Feature marked.
/// For every user in [`USERS_FILE`]: the plan of [`neutralise`] carried out, then sudo's
/// own listing for the user judged by [`beyond_feature`]; a grant left is an error that
/// names it (the build stops; at a start, the entrypoint logs it and `test` fails).
pub fn restrict() -> Result<Vec<String>, Error> {
    if runtime_layout::detect() != runtime_layout::Where::Container {
        return Err(Error::NotAnImage("sudo-restrict"));
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source: std::io::Error| Error::Io { path: path.clone(), source }
    };
    let users = std::fs::read_to_string(USERS_FILE).map_err(io(Path::new(USERS_FILE)))?;
    let mut lines = Vec::new();
    for user in users.lines().map(str::trim).filter(|user| !user.is_empty()) {
        let failed = |message: String| Error::Sudo { user: user.to_owned(), message };
        let account = account(user).map_err(&failed)?;
        let mut paths = vec![PathBuf::from("/etc/sudoers")];
        if let Ok(entries) = std::fs::read_dir("/etc/sudoers.d") {
            let mut names: Vec<PathBuf> = entries.filter_map(|entry| entry.ok().map(|entry| entry.path())).collect();
            names.sort();
            paths.extend(names.into_iter().filter(|path| path != Path::new(SUDOERS_FILE)));
        }
        let files: Vec<(PathBuf, String)> = paths
            .into_iter()
            .filter(|path| path.symlink_metadata().is_ok_and(|meta| meta.is_file()))
            .filter_map(|path| std::fs::read_to_string(&path).ok().map(|text| (path, text)))
            .collect();
        let plan = neutralise(&files, &account);
        for (path, indexes) in &plan.lines {
            let text = &files.iter().find(|(file, _)| file == path).expect("planned from these files").1;
            let mut out = String::new();
            for (idx, line) in text.lines().enumerate() {
                if indexes.contains(&idx) {
                    out.push_str(REMOVED);
                    lines.push(format!("{}: removed for {user}: {}", path.display(), line.trim()));
                }
                out.push_str(line);
                out.push('\n');
            }
            util::fs::atomic_write(path, out.as_bytes(), 0o440).map_err(io(path))?;
        }
        for group in &plan.groups {
            let out = std::process::Command::new("gpasswd")
                .args(["-d", user, group])
                .output()
                .map_err(|err| failed(format!("gpasswd: {err}")))?;
            if !out.status.success() {
                return Err(failed(format!(
                    "cannot take it out of the group {group}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
            lines.push(format!("{user} left the group {group} (its sudo rule)"));
        }
        // The listing is parsed: in the C locale, whatever the image's (or the agent's).
        let listing = std::process::Command::new("sudo")
            .args(["-n", "-l", "-U", user])
            .env("LC_ALL", "C")
            .env_remove("LANGUAGE")
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|err| failed(format!("sudo -l -U: {err}")))?;
        if !listing.status.success() {
            return Err(failed(format!(
                "sudo -l -U {user} failed: {}",
                String::from_utf8_lossy(&listing.stderr).trim()
            )));
        }
        let beyond = beyond_feature(&String::from_utf8_lossy(&listing.stdout));
        if !beyond.is_empty() {
            return Err(failed(format!("sudo still grants: {}", beyond.join("; "))));
        }
    }
    Ok(lines)
}

/// The user's uid and groups, as `id` reports them.
fn account(user: &str) -> Result<Account, String> {
    let id = |flags: &[&str]| -> Result<String, String> {
        let out =
            std::process::Command::new("id").args(flags).arg(user).output().map_err(|err| format!("id: {err}"))?;
        if !out.status.success() {
            return Err(format!("no such user ({})", String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let number = |text: &str| text.parse::<u32>().map_err(|_| format!("id printed {text:?}, not a number"));
    let primary = (id(&["-gn"])?, number(&id(&["-g"])?)?);
    let names = id(&["-Gn"])?;
    let gids = id(&["-G"])?;
    let mut groups = Vec::new();
    for (name, gid) in names.split_whitespace().zip(gids.split_whitespace()) {
        let gid = number(gid)?;
        if gid != primary.1 {
            groups.push((name.to_owned(), gid));
        }
    }
    Ok(Account { name: user.to_owned(), uid: number(&id(&["-u"])?)?, primary, groups })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sudo -n -l` in the Feature's image (sudo 1.9, Debian), for `vscode`.
    const FEATURE_LISTING: &str = "Matching Defaults entries for vscode on c0ffee:\n    env_reset, mail_badpass, \
        secure_path=/usr/local/sbin\\:/usr/local/bin\\:/usr/sbin\\:/usr/bin\\:/sbin\\:/bin, use_pty, env_reset\n\n\
        User vscode may run the following commands on c0ffee:\n    (root) NOPASSWD: /usr/local/bin/agent-sandbox \
        firewall apply, /usr/local/bin/agent-sandbox firewall status, /usr/local/bin/agent-sandbox firewall start, \
        /usr/local/bin/agent-sandbox push-verify\n";

    /// The Feature's rules alone hold; each grant beyond them (common-utils' line, a
    /// group's, another user to run as, `SETENV`, a `Defaults` that lets the caller's
    /// environment through) is named.
    #[test]
    fn sudo_beyond_the_features_rules_is_named() {
        assert_eq!(beyond_feature(FEATURE_LISTING), Vec::<String>::new());
        assert_eq!(beyond_feature(""), Vec::<String>::new());
        let more = |extra: &str| beyond_feature(&format!("{FEATURE_LISTING}{extra}"));
        assert_eq!(more("    (root) NOPASSWD: ALL\n"), ["(root) NOPASSWD: ALL"]);
        // `%sudo ALL=(ALL:ALL) ALL`: with a password, still a way to root.
        assert_eq!(more("    (ALL : ALL) ALL\n"), ["(ALL : ALL) ALL"]);
        assert_eq!(more("    (root) NOPASSWD: /usr/sbin/iptables\n"), ["(root) NOPASSWD: /usr/sbin/iptables"]);
        assert_eq!(
            more("    (root) SETENV: NOPASSWD: /usr/local/bin/agent-sandbox push-verify\n"),
            ["(root) SETENV: NOPASSWD: /usr/local/bin/agent-sandbox push-verify"]
        );
        assert_eq!(
            more("    (postgres) NOPASSWD: /usr/local/bin/agent-sandbox firewall status\n"),
            ["(postgres) NOPASSWD: /usr/local/bin/agent-sandbox firewall status"]
        );
        // As sudo wraps it at 80 columns.
        let wrapped = FEATURE_LISTING
            .replace("firewall apply, ", "firewall\n        apply, ")
            .replace("use_pty, env_reset", "use_pty,\n    env_reset");
        assert_eq!(beyond_feature(&wrapped), Vec::<String>::new());
        let wrapped =
            format!("{wrapped}    (root) NOPASSWD: /usr/local/bin/agent-sandbox\n        firewall apply, ALL\n");
        assert_eq!(beyond_feature(&wrapped), ["(root) NOPASSWD: /usr/local/bin/agent-sandbox firewall apply, ALL"]);
        let defaults = FEATURE_LISTING.replace("use_pty, env_reset", "use_pty, !env_reset, env_keep+=LD_PRELOAD");
        assert_eq!(beyond_feature(&defaults), ["Defaults !env_reset", "Defaults env_keep+=LD_PRELOAD"]);
    }

    /// One source of truth: the rule install.sh writes allows exactly [`FEATURE_SUDO`].
    #[test]
    fn the_features_sudo_rule_is_the_one_judged() {
        let install = include_str!("../../../devcontainer/feature/agent-sandbox/install.sh");
        let rule = install.lines().find(|line| line.contains("ALL=(root) NOPASSWD:")).expect("the rule");
        let commands = rule.split_once("NOPASSWD: ").expect("commands").1.trim_end_matches('"');
        assert_eq!(commands.split(", ").collect::<Vec<_>>(), FEATURE_SUDO);
    }

    fn vscode() -> Account {
        Account {
            name: "vscode".into(),
            uid: 1000,
            primary: ("vscode".into(), 1000),
            groups: vec![("sudo".into(), 27), ("docker".into(), 999)],
        }
    }

    /// common-utils' grant, and every other way a sudoers line names the user, goes;
    /// lines for other users, Defaults and comments stay; a group's rule stays for the
    /// group, and the user leaves the group.
    #[test]
    fn every_grant_naming_the_user_is_neutralised_and_the_rest_kept() {
        let sudoers = "Defaults env_reset\n# comment vscode ALL\n#includedir /etc/sudoers.d\n\
                       root ALL=(ALL:ALL) ALL\n%sudo ALL=(ALL:ALL) ALL\n%admin ALL=(ALL) ALL\n";
        let files = vec![
            (PathBuf::from("/etc/sudoers"), sudoers.to_owned()),
            (PathBuf::from("/etc/sudoers.d/vscode"), "vscode ALL=(root) NOPASSWD:ALL\n".to_owned()),
            (
                PathBuf::from("/etc/sudoers.d/more"),
                "User_Alias DEVS = alice, #1000\nDEVS ALL = NOPASSWD: /usr/sbin/iptables\n\
                 bob ALL=(ALL) ALL\nalice , vscode ALL=(ALL) \\\n   NOPASSWD: ALL\n#1000 ALL=(ALL) ALL\n\
                 %vscode ALL=(ALL) ALL\nALL ALL=(root) NOPASSWD: /bin/true\nDefaults:vscode !env_reset\n\
                 bob, !vscode ALL=(ALL) ALL\n"
                    .to_owned(),
            ),
        ];
        let plan = neutralise(&files, &vscode());
        assert_eq!(
            plan,
            Neutralise {
                lines: vec![
                    (PathBuf::from("/etc/sudoers.d/vscode"), vec![0]),
                    (PathBuf::from("/etc/sudoers.d/more"), vec![1, 3, 4, 5, 6, 7]),
                ],
                groups: vec!["sudo".into()],
            }
        );
        // The user the image grants nothing: nothing to do.
        let plain = Account { name: "dev".into(), uid: 1001, primary: ("dev".into(), 1001), groups: Vec::new() };
        assert_eq!(neutralise(&files[..1], &plain), Neutralise::default());
    }
}
