//! Which `PATH` entries the host may search for programs it runs with authority over the
//! agent: bwrap itself, and the checks that guard a push. An entry the agent can write
//! (in the project, under a writable grant) or that names a different directory
//! wherever it is used (relative, empty) would let the agent plant the program
//! (`node_modules/.bin/sh`, `npm`, `pytest`, `bwrap`) that then passes every check or
//! runs unsandboxed. The rule is a pure function of the entries and the facts, and says
//! for each dropped entry why.

use std::{
    ffi::{OsStr, OsString},
    fmt,
    path::{Path, PathBuf},
};

use crate::{Access, Kind, Mount};

/// What the judgement of one entry needs. `real` is the entry with its symlinks resolved
/// (the caller's lookup; `None` when it does not exist): an entry is judged by both its
/// written and its real path.
pub struct SearchFacts<'a> {
    pub project_root: &'a Path,
    /// The session's mounts: every `rw` one is the agent's to write.
    pub mounts: &'a [Mount],
    /// agent-sandbox's runtime directory, where it appears (never a place for tools).
    pub runtime_dirs: &'a [&'a Path],
    /// Whether an entry must be shown read-only in the sandbox (the checks run in one;
    /// what no mount shows there is its own scratch `/tmp` and home, or nothing). bwrap
    /// runs on the host, where the sandbox's scratch does not exist.
    pub inside: bool,
    pub real: &'a dyn Fn(&Path) -> Option<PathBuf>,
}

/// Why an entry is not searched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dropped {
    /// `a::b`, a leading or trailing `:`: the shell reads it as the current directory.
    Empty,
    Relative,
    InProject,
    /// Under (or holding) this `rw` grant.
    Writable(PathBuf),
    Runtime,
    NotShown,
    /// A container's verifier: a user other than root could change it (the reason).
    NotRootOnly(String),
}

impl fmt::Display for Dropped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dropped::Empty => write!(f, "empty, so the current directory"),
            Dropped::Relative => write!(f, "relative, so a different directory wherever it is used"),
            Dropped::InProject => write!(f, "in the project, which the agent writes"),
            Dropped::Writable(grant) => write!(f, "the agent can write it (read-write grant {})", grant.display()),
            Dropped::Runtime => write!(f, "agent-sandbox's runtime directory"),
            Dropped::NotShown => write!(f, "not shown read-only in the sandbox (its own scratch there)"),
            Dropped::NotRootOnly(why) => write!(f, "not root's alone: {why}"),
        }
    }
}

/// The entries kept, in order, and the ones dropped with the reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchPath {
    pub kept: Vec<PathBuf>,
    pub dropped: Vec<(OsString, Dropped)>,
}

impl SearchPath {
    /// The kept entries as a `PATH` value.
    pub fn joined(&self) -> OsString {
        let mut value = OsString::new();
        for (index, dir) in self.kept.iter().enumerate() {
            if index > 0 {
                value.push(":");
            }
            value.push(dir);
        }
        value
    }

    /// One line per dropped entry: `ENTRY (REASON)`.
    pub fn dropped_lines(&self) -> Vec<String> {
        let shown =
            |entry: &OsStr| if entry.is_empty() { "''".to_owned() } else { Path::new(entry).display().to_string() };
        self.dropped.iter().map(|(entry, why)| format!("{} ({why})", shown(entry))).collect()
    }
}

/// Splits `path_var` as the shell does (`:`; empty entries kept) and judges every entry.
pub fn decide(path_var: &OsStr, facts: &SearchFacts<'_>) -> SearchPath {
    decide_by(path_var, &|entry| judge(entry, facts))
}

/// [`decide`] with another judge of the absolute entries (a container's verifier, where
/// nothing is granted and only root's directories are trusted).
pub fn decide_by(path_var: &OsStr, judge_entry: &dyn Fn(&Path) -> Result<(), Dropped>) -> SearchPath {
    let mut search = SearchPath::default();
    if path_var.is_empty() {
        return search;
    }
    for entry in path_var.as_encoded_bytes().split(|byte| *byte == b':') {
        // SAFETY: split at an ASCII byte of a valid encoded OsStr.
        let entry = unsafe { OsStr::from_encoded_bytes_unchecked(entry) };
        let path = Path::new(entry);
        let verdict = if entry.is_empty() {
            Err(Dropped::Empty)
        } else if !path.is_absolute() {
            Err(Dropped::Relative)
        } else {
            judge_entry(path)
        };
        match verdict {
            Ok(()) => search.kept.push(crate::normalize(path)),
            Err(why) => search.dropped.push((entry.to_owned(), why)),
        }
    }
    search
}

/// Whether the host may run programs from the directory (or the program) `path`.
pub fn judge(path: &Path, facts: &SearchFacts<'_>) -> Result<(), Dropped> {
    if path.as_os_str().is_empty() {
        return Err(Dropped::Empty);
    }
    if !path.is_absolute() {
        return Err(Dropped::Relative);
    }
    let written = crate::normalize(path);
    let real = (facts.real)(&written);
    for path in std::iter::once(&written).chain(real.as_ref()) {
        if path.starts_with(facts.project_root) {
            return Err(Dropped::InProject);
        }
        if facts.runtime_dirs.iter().any(|dir| path.starts_with(dir)) {
            return Err(Dropped::Runtime);
        }
        // A file granted in the directory counts too: `--rw ~/.local/bin/tool` is the tool.
        let writable = facts.mounts.iter().filter(|mount| mount.access == Access::Rw).find(|mount| {
            path.starts_with(&mount.path)
                || mount.kind == Kind::File && mount.path.parent().is_some_and(|parent| parent == path.as_path())
        });
        if let Some(mount) = writable {
            return Err(Dropped::Writable(mount.path.clone()));
        }
    }
    if facts.inside && crate::access_of(&written, facts.mounts) != Some(Access::Ro) {
        return Err(Dropped::NotShown);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use config::{LayerKind, Location, Origin};

    use super::*;

    fn mount(path: &str, access: Access) -> Mount {
        let kind = if path.ends_with("tool") { Kind::File } else { Kind::Dir };
        Mount {
            path: path.into(),
            access,
            kind,
            link: None,
            rule: path.to_owned(),
            origin: Origin { layer: LayerKind::Cli, location: Location::Flag("--test".into()) },
        }
    }

    fn mounts() -> Vec<Mount> {
        vec![
            mount("/usr", Access::Ro),
            mount("/h/u/.local/bin", Access::Ro),
            mount("/h/u/.local/lib", Access::Ro),
            mount("/h/u/.cache", Access::Rw),
            mount("/h/u/proj", Access::Rw),
            mount("/h/u/proj/.husky", Access::Ro),
            mount("/opt/tools", Access::Ro),
            mount("/opt/tools/npm", Access::Rw),
            mount("/opt/shown", Access::Ro),
            mount("/opt/shown/sub", Access::Rw),
            mount("/opt/granted/tool", Access::Rw),
            mount("/secret", Access::Exclude),
        ]
    }

    /// `/usr/local/link` leads into the project, `/usr/local/elsewhere` to `/usr/bin`.
    fn real(path: &Path) -> Option<PathBuf> {
        match path.to_str()? {
            "/usr/local/link" => Some("/h/u/proj/bin".into()),
            "/usr/local/elsewhere" => Some("/usr/bin".into()),
            "/usr/local/cache" => Some("/h/u/.cache/bin".into()),
            _ => Some(path.to_path_buf()),
        }
    }

    #[test]
    fn only_absolute_entries_the_agent_cannot_write_are_searched() {
        let mounts = mounts();
        let runtime = [Path::new("/run/agent-sandbox"), Path::new("/run/user/0/agent-sandbox-x")];
        for inside in [true, false] {
            let facts = SearchFacts {
                project_root: Path::new("/h/u/proj"),
                mounts: &mounts,
                runtime_dirs: &runtime,
                inside,
                real: &real,
            };
            let project = Dropped::InProject;
            let not_shown = if inside { Err(Dropped::NotShown) } else { Ok(()) };
            let cases: Vec<(&str, Result<(), Dropped>)> = vec![
                ("/usr/bin", Ok(())),
                ("/usr/local/bin/", Ok(())),
                ("/usr/local/elsewhere", Ok(())),
                ("/h/u/.local/bin", Ok(())),
                // A read-only mount holding a writable directory, or a writable file.
                ("/opt/shown", Ok(())),
                ("/opt/shown/bin", Ok(())),
                ("/opt/granted", Err(Dropped::Writable("/opt/granted/tool".into()))),
                ("/opt/tools/bin", Ok(())),
                ("/opt/tools/npm/bin", Err(Dropped::Writable("/opt/tools/npm".into()))),
                ("/h/u/proj/node_modules/.bin", Err(project.clone())),
                // Read-only inside the writable project: its parents can be swapped.
                ("/h/u/proj/.husky", Err(project.clone())),
                ("/h/u/proj/../proj/bin", Err(project.clone())),
                ("/usr/local/link", Err(project.clone())),
                ("/usr/local/cache", Err(Dropped::Writable("/h/u/.cache".into()))),
                ("/h/u/.cache/bin", Err(Dropped::Writable("/h/u/.cache".into()))),
                ("/run/agent-sandbox", Err(Dropped::Runtime)),
                ("/run/user/0/agent-sandbox-x/bin", Err(Dropped::Runtime)),
                ("node_modules/.bin", Err(Dropped::Relative)),
                (".", Err(Dropped::Relative)),
                ("", Err(Dropped::Empty)),
                // Not shown: the sandbox's scratch home, an excluded directory.
                ("/h/u/bin", not_shown.clone()),
                ("/secret/bin", not_shown),
            ];
            for (entry, expected) in cases {
                assert_eq!(judge(Path::new(entry), &facts), expected, "{entry} (inside: {inside})");
            }
        }
    }

    #[test]
    fn a_search_path_keeps_the_order_and_says_what_it_dropped() {
        let mounts = mounts();
        let facts = SearchFacts {
            project_root: Path::new("/h/u/proj"),
            mounts: &mounts,
            runtime_dirs: &[Path::new("/run/agent-sandbox")],
            inside: true,
            real: &real,
        };
        let search =
            decide(OsStr::new("/h/u/proj/node_modules/.bin:/h/u/.local/bin::/usr/bin:bin:/run/agent-sandbox:"), &facts);
        let expected = SearchPath {
            kept: vec!["/h/u/.local/bin".into(), "/usr/bin".into()],
            dropped: vec![
                ("/h/u/proj/node_modules/.bin".into(), Dropped::InProject),
                ("".into(), Dropped::Empty),
                ("bin".into(), Dropped::Relative),
                ("/run/agent-sandbox".into(), Dropped::Runtime),
                ("".into(), Dropped::Empty),
            ],
        };
        assert_eq!(search, expected);
        assert_eq!(search.joined(), OsString::from("/h/u/.local/bin:/usr/bin"));
        assert_eq!(
            search.dropped_lines()[..2],
            [
                "/h/u/proj/node_modules/.bin (in the project, which the agent writes)".to_owned(),
                "'' (empty, so the current directory)".to_owned()
            ]
        );
        assert_eq!(decide(OsStr::new(""), &facts), SearchPath::default());
    }

    #[test]
    fn another_judge_decides_only_absolute_entries() {
        let judge = |entry: &Path| match entry.starts_with("/usr/local") {
            true => Err(Dropped::NotRootOnly("owner uid 1000, mode 755".into())),
            false => Ok(()),
        };
        let search = decide_by(OsStr::new("/usr/local/bin:/usr/bin:bin::/bin/"), &judge);
        let expected = SearchPath {
            kept: vec!["/usr/bin".into(), "/bin".into()],
            dropped: vec![
                ("/usr/local/bin".into(), Dropped::NotRootOnly("owner uid 1000, mode 755".into())),
                ("bin".into(), Dropped::Relative),
                ("".into(), Dropped::Empty),
            ],
        };
        assert_eq!(search, expected);
        assert_eq!(search.dropped_lines()[0], "/usr/local/bin (not root's alone: owner uid 1000, mode 755)");
    }
}
