//! Turns an effective [`config::Config`] into a concrete filesystem policy: presets are
//! expanded, paths resolved (`~`, relative to the effective cwd, globs to existing paths)
//! and conflicts settled by specificity, giving the ordered list of [`Mount`]s the sandbox
//! plan turns into bwrap arguments. Also home to the project-root and git-layout
//! discovery and the environment filter.
//!
//! Specificity, as the design fixes it: a longer path beats a shorter one (by mount
//! order: parents are mounted first); on the same path an exact path beats a glob, then
//! exclude > ro > rw, then the later configuration layer wins.

pub mod env;
pub mod git;
pub mod network;
pub mod path_search;
pub mod presets;
pub mod settings;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use config::{CommandRule, Config, LayerKind, Location, Network, Origin, Sourced};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    Rw,
    Ro,
    Exclude,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Rw => "rw",
            Access::Ro => "ro",
            Access::Exclude => "exclude",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    /// A regular file or anything else that is not a directory.
    File,
}

/// One resolved path and the access that won for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub path: PathBuf,
    pub access: Access,
    pub kind: Kind,
    /// For a symlink whose target the sandbox shows anyway (`/bin` -> `usr/bin`): the
    /// link text, recreated as a symlink instead of another bind mount.
    pub link: Option<PathBuf>,
    /// The rule that won: what was written and where.
    pub rule: String,
    pub origin: Origin,
}

/// The facts about the invocation that path resolution needs.
#[derive(Debug, Clone)]
pub struct Context {
    pub home: PathBuf,
    /// The effective working directory (`-C` or the current directory), absolute.
    pub cwd: PathBuf,
    pub project_root: PathBuf,
    /// The effective `core.hooksPath` (absolute), as git would use it in the project,
    /// if set anywhere in its configuration.
    pub hooks_path: Option<PathBuf>,
    /// The agent's git is its own (`git.sessionRepository` with `@git`, and a layout a
    /// session repository can stand in for): the sandbox binds it where git looks, and
    /// shows nothing of the user's git directories. Otherwise they are read-only.
    pub session_git: bool,
}

#[derive(Debug)]
pub struct Policy {
    pub network: Sourced<Network>,
    /// Sorted so that a parent comes before anything inside it.
    pub mounts: Vec<Mount>,
    pub commands: BTreeMap<String, Sourced<CommandRule>>,
    /// Settings files shown read-only as a copy without credential lines (`@settings`),
    /// bound after the mounts; each exists as a file.
    pub copies: Vec<SettingsCopy>,
    /// Debug notes: the decisions made on the way, in order.
    pub notes: Vec<String>,
}

/// A host file the sandbox shows as a redacted copy ([`settings::redact`]), at its path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsCopy {
    pub path: PathBuf,
    /// The preset entry that shows it (`@settings: .npmrc`).
    pub rule: String,
    pub origin: Origin,
}

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("{message} (from {origin})")]
    Preset { origin: Origin, message: String },
    #[error("{flag} {path}: no such file or directory (check the path, or create it first)")]
    MissingPath { flag: String, path: String },
    #[error("{pattern}: bad glob: {message} (from {origin})")]
    Glob { pattern: String, origin: Origin, message: String },
    #[error(
        "refusing to use {} as the project: it would give the agent all of it \
         (run agent-sandbox inside a project directory, or pass -C DIR)",
        .0.display()
    )]
    ProjectTooBroad(PathBuf),
    #[error(
        "{flag} {path}: the exclude {exclude:?} (from {origin}) hides that path all the same: on one path an \
         exclude beats ro and rw whatever the layer, so that no layer quietly shows what another hides; {}",
        hidden_advice(.flag, .path, *.dir)
    )]
    HiddenByExclude { flag: String, path: String, exclude: String, origin: Origin, dir: bool },
}

/// What to do instead of a grant an exclude beats: in a directory, name what is needed
/// inside it; a file stays hidden.
fn hidden_advice(flag: &str, path: &str, dir: bool) -> String {
    if dir {
        format!(
            "name what you need inside it instead ({flag} {}/NAME: a longer path beats a shorter one)",
            path.trim_end_matches('/')
        )
    } else {
        "a file it names stays hidden (drop the flag)".to_owned()
    }
}

/// The project root for `cwd`: the nearest ancestor holding `.git` (a directory, or a
/// file for worktrees and submodules), else `cwd` itself.
pub fn find_project_root(cwd: &Path, home: &Path) -> Result<PathBuf, PolicyError> {
    let root = cwd.ancestors().find(|dir| dir.join(".git").symlink_metadata().is_ok()).unwrap_or(cwd).to_path_buf();
    if root == Path::new("/") || root == home {
        return Err(PolicyError::ProjectTooBroad(root));
    }
    Ok(root)
}

struct Rule {
    path: PathBuf,
    access: Access,
    exact: bool,
    layer: u8,
    written: String,
    origin: Origin,
}

fn layer_rank(kind: &LayerKind) -> u8 {
    match kind {
        LayerKind::Default => 0,
        LayerKind::Global => 1,
        LayerKind::Project => 2,
        LayerKind::Explicit => 3,
        LayerKind::Cli => 4,
    }
}

/// Resolves `config` for the invocation described by `ctx`.
pub fn resolve(config: &Config, ctx: &Context) -> Result<Policy, PolicyError> {
    let mut notes = Vec::new();
    let mut rules: Vec<Rule> = Vec::new();

    // `"project": "ro"` / `--read-only`: a read-only agent; the kernel refuses every write
    // to the project (grants inside it still apply).
    let project_access = if config.project_read_only.value { Access::Ro } else { Access::Rw };
    rules.push(Rule {
        path: ctx.project_root.clone(),
        access: project_access,
        exact: true,
        layer: 0,
        written: "<project root>".into(),
        origin: config.project_read_only.origin.clone(),
    });

    // The user's git directories are never writable inside: the session repository
    // stands in for them, or they are read-only (history readable, no commits).
    for (access, path) in git::dir_rules(&ctx.project_root, ctx.session_git, &mut notes) {
        rules.push(Rule {
            path,
            access,
            exact: true,
            layer: 0,
            written: "<the user's git directories>".into(),
            origin: Origin::builtin(),
        });
    }

    let enabled = presets::expand(&config.presets)?;
    notes.push(format!(
        "presets: {}",
        enabled.iter().map(|(preset, _)| format!("@{}", preset.name)).collect::<Vec<_>>().join(" ")
    ));
    let mut commands: BTreeMap<String, Sourced<CommandRule>> = BTreeMap::new();
    let mut copies: Vec<SettingsCopy> = Vec::new();
    for (preset, origin) in &enabled {
        let layer = layer_rank(&origin.layer);
        for preset_path in preset.copies {
            let base = match preset_path.root {
                presets::Root::Abs => PathBuf::from("/"),
                presets::Root::Home => ctx.home.clone(),
                presets::Root::Project => ctx.project_root.clone(),
            };
            let path = base.join(preset_path.path);
            if path.is_file() {
                let rule = format!("@{}: {}", preset.name, preset_path.path);
                copies.push(SettingsCopy { path, rule, origin: origin.clone() });
            }
        }
        for (access, paths) in [(Access::Ro, preset.ro), (Access::Rw, preset.rw), (Access::Exclude, preset.exclude)] {
            for preset_path in paths {
                let base = match preset_path.root {
                    presets::Root::Abs => PathBuf::from("/"),
                    presets::Root::Home => ctx.home.clone(),
                    presets::Root::Project => ctx.project_root.clone(),
                };
                let pattern = base.join(preset_path.path);
                let written = format!("@{}: {}", preset.name, preset_path.path);
                for (path, exact) in expand_pattern(&pattern, &written, origin)? {
                    rules.push(Rule { path, access, exact, layer, written: written.clone(), origin: origin.clone() });
                }
            }
        }
        for (name, rule) in preset.commands {
            commands.insert((*name).to_owned(), Sourced { value: CommandRule::parse(rule), origin: origin.clone() });
        }
        if preset.name == "git" {
            for (access, path) in git::layout_rules(ctx.hooks_path.as_deref()) {
                rules.push(Rule {
                    path,
                    access,
                    exact: true,
                    layer,
                    written: "@git: repository layout".into(),
                    origin: origin.clone(),
                });
            }
        }
    }
    // Explicit command rules beat the ones presets set.
    commands.extend(config.commands.iter().map(|(name, rule)| (name.clone(), rule.clone())));

    for (access, entries) in [(Access::Ro, &config.ro), (Access::Rw, &config.rw), (Access::Exclude, &config.exclude)] {
        for entry in entries {
            let pattern = resolve_path(&entry.value, ctx, &entry.origin);
            let expanded = expand_pattern(&pattern, &entry.value, &entry.origin)?;
            if expanded.is_empty() {
                if let Location::Flag(flag) = &entry.origin.location {
                    if !is_glob(&entry.value) {
                        return Err(PolicyError::MissingPath { flag: flag.clone(), path: entry.value.clone() });
                    }
                }
                // Built-in entries name paths many machines lack: not worth a line each.
                if entry.origin.layer != LayerKind::Default {
                    notes.push(format!("path {} ({}): nothing exists there, skipped", entry.value, entry.origin));
                }
            }
            for (path, exact) in expanded {
                // A symlinked secret directory stays hidden under its real name too.
                if access == Access::Exclude {
                    if let Ok(real) = path.canonicalize() {
                        if real != path {
                            rules.push(Rule {
                                path: real,
                                access,
                                exact,
                                layer: layer_rank(&entry.origin.layer),
                                written: entry.value.clone(),
                                origin: entry.origin.clone(),
                            });
                        }
                    }
                }
                rules.push(Rule {
                    path,
                    access,
                    exact,
                    layer: layer_rank(&entry.origin.layer),
                    written: entry.value.clone(),
                    origin: entry.origin.clone(),
                });
            }
        }
    }

    check_hidden_grants(&rules, &mut notes)?;
    // A copy shows no credential, so the built-in excludes (`~/.npmrc`) do not stop it;
    // an exclude someone wrote, of the file or a directory above it, does.
    copies.retain(|copy| {
        let excluded_by = rules.iter().find(|rule| {
            rule.access == Access::Exclude
                && rule.origin.layer != LayerKind::Default
                && copy.path.starts_with(&rule.path)
        });
        match excluded_by {
            Some(rule) => {
                notes.push(format!(
                    "settings {}: not shown, excluded by {} (from {})",
                    copy.path.display(),
                    rule.written,
                    rule.origin
                ));
                false
            }
            None => true,
        }
    });
    let mounts = settle(rules, ctx, &mut notes);
    // A settings file the sandbox can write may be the agent's, from this grant in an
    // earlier session: a symlink it planted there would have the host copy whatever it
    // names (a key the policy hides) into the sandbox. Copied only from where it cannot.
    copies.retain(|copy| {
        let real = copy.path.canonicalize().unwrap_or_else(|_| copy.path.clone());
        let writable = [&copy.path, &real].iter().any(|path| access_of(path, &mounts) == Some(Access::Rw));
        if writable {
            notes.push(format!(
                "settings {}: not shown, the sandbox can write it (what it holds may be the agent's)",
                copy.path.display()
            ));
        }
        !writable
    });
    for mount in &mounts {
        notes.push(format!(
            "access {:<7} {} ({}, from {})",
            mount.access.as_str(),
            mount.path.display(),
            mount.rule,
            mount.origin
        ));
    }
    Ok(Policy { network: config.network.clone(), mounts, commands, copies, notes })
}

/// A grant someone wrote (`--ro`, `--rw`, `filesystem.ro`/`rw`) that an exclude of the
/// same path beats (an exact exclude, or any exclude of a glob's match) shows nothing: on
/// the command line, where it is the user's explicit request (`--ro ~/.ssh` against the
/// built-in exclude), that is an error saying why; from a config file, a note.
fn check_hidden_grants(rules: &[Rule], notes: &mut Vec<String>) -> Result<(), PolicyError> {
    let written_grants = rules.iter().filter(|rule| {
        rule.access != Access::Exclude && rule.origin.layer != LayerKind::Default && !rule.written.starts_with('@')
    });
    for grant in written_grants {
        if grant.written == "<project root>" {
            continue;
        }
        let Some(exclude) = rules
            .iter()
            .find(|rule| rule.access == Access::Exclude && rule.path == grant.path && (rule.exact || !grant.exact))
        else {
            continue;
        };
        if let Location::Flag(flag) = &grant.origin.location {
            return Err(PolicyError::HiddenByExclude {
                flag: flag.clone(),
                path: grant.written.clone(),
                exclude: exclude.written.clone(),
                origin: exclude.origin.clone(),
                dir: grant.path.is_dir(),
            });
        }
        notes.push(format!(
            "{} {} ({}): hidden all the same by the exclude {} (from {}): on one path exclude beats ro and rw",
            grant.access.as_str(),
            grant.written,
            grant.origin,
            exclude.written,
            exclude.origin
        ));
    }
    Ok(())
}

/// Picks the winning rule per path and orders the result parents-first. Excludes
/// under nothing visible are dropped: there is nothing to hide.
fn settle(rules: Vec<Rule>, ctx: &Context, notes: &mut Vec<String>) -> Vec<Mount> {
    let project = ctx.project_root.canonicalize().unwrap_or_else(|_| ctx.project_root.clone());
    let mut best: BTreeMap<PathBuf, Rule> = BTreeMap::new();
    for rule in rules {
        // The project's contents are the agent's to shape: a path in it that leads
        // outside (a symlink it planted last time) must not mount the outside in.
        if rule.access != Access::Exclude && rule.path.starts_with(&ctx.project_root) && rule.path != ctx.project_root {
            if let Ok(real) = rule.path.canonicalize() {
                if !real.starts_with(&project) {
                    notes.push(format!(
                        "skipped {} ({}): it leads outside the project, to {}",
                        rule.path.display(),
                        rule.written,
                        real.display()
                    ));
                    continue;
                }
            }
        }
        let key = (rule.exact, rule.access, rule.layer);
        match best.get(&rule.path) {
            Some(current) if (current.exact, current.access, current.layer) > key => {}
            _ => {
                best.insert(rule.path.clone(), rule);
            }
        }
    }
    let mut mounts: Vec<Mount> = Vec::new();
    for (path, rule) in &best {
        if rule.access == Access::Exclude {
            // The nearest rule above it: its deepest ancestor that has one.
            let nearest = path.ancestors().skip(1).find_map(|ancestor| best.get(ancestor));
            if nearest.is_none_or(|above| above.access == Access::Exclude) {
                continue;
            }
        }
        let kind = if path.is_dir() { Kind::Dir } else { Kind::File };
        mounts.push(Mount {
            path: path.clone(),
            access: rule.access,
            kind,
            link: None,
            rule: rule.written.clone(),
            origin: rule.origin.clone(),
        });
    }
    let read_only: Vec<PathBuf> =
        mounts.iter().filter(|mount| mount.access == Access::Ro).map(|mount| mount.path.clone()).collect();
    pin_parents(&mut mounts, &read_only);
    mounts.sort_by(|a, b| {
        a.path.components().count().cmp(&b.path.components().count()).then_with(|| a.path.cmp(&b.path))
    });
    // A symlink to something mounted anyway costs a mount less as a symlink.
    let links: Vec<Option<PathBuf>> = mounts
        .iter()
        .map(|mount| {
            if mount.access == Access::Exclude || !mount.path.symlink_metadata().is_ok_and(|meta| meta.is_symlink()) {
                return None;
            }
            let target = mount.path.canonicalize().ok()?;
            let covered = mounts.iter().any(|other| {
                other.path != mount.path && other.access == mount.access && target.starts_with(&other.path)
            });
            if covered && is_visible(&target, &mounts) {
                std::fs::read_link(&mount.path).ok()
            } else {
                None
            }
        })
        .collect();
    for (mount, link) in mounts.iter_mut().zip(links) {
        mount.link = link;
    }
    mounts
}

/// A path that must stay where it is inside a writable mount stays put only if its
/// parents do: binds each parent between it and the enclosing writable mount onto
/// itself, so renaming it away (`mv .git x`, then a new `.git/hooks`) fails with EBUSY.
/// Keeps `mounts` ordered parents first.
pub fn pin_parents(mounts: &mut Vec<Mount>, targets: &[PathBuf]) {
    // One mount per distinct directory, found with sets: a thousand masks deep in one
    // tree must cost their distinct parents, not a thousand times the depth.
    // Each path's mount (the last one of a path mounted twice); the enclosing mount of
    // a target is then its deepest ancestor found here, one lookup per level.
    let mounted: std::collections::HashMap<&Path, &Mount> =
        mounts.iter().map(|mount| (mount.path.as_path(), mount)).collect();
    let mut pinned: std::collections::HashSet<&Path> = std::collections::HashSet::new();
    let mut pins: Vec<PathBuf> = Vec::new();
    for target in targets {
        // A sibling's walk pinned this parent and everything up to their shared
        // enclosing mount already.
        if target.parent().is_some_and(|parent| pinned.contains(parent)) {
            continue;
        }
        let Some(enclosing) = target.ancestors().skip(1).find_map(|ancestor| mounted.get(ancestor)) else {
            continue;
        };
        if enclosing.access != Access::Rw {
            continue;
        }
        for ancestor in target.ancestors().skip(1) {
            // Reached from another target: the rest of the way up is pinned (the
            // enclosing mount of both is the same, the deepest one above it).
            if ancestor == enclosing.path || pinned.contains(ancestor) {
                break;
            }
            if !mounted.contains_key(ancestor) {
                pinned.insert(ancestor);
                pins.push(ancestor.to_path_buf());
            }
        }
    }
    for pin in pins {
        mounts.push(Mount {
            path: pin,
            access: Access::Rw,
            kind: Kind::Dir,
            link: None,
            rule: "pinned: parent of a path that must stay".into(),
            origin: Origin::builtin(),
        });
    }
    mounts.sort_by(|a, b| {
        a.path.components().count().cmp(&b.path.components().count()).then_with(|| a.path.cmp(&b.path))
    });
}

/// Whether `path` is inside something the sandbox mounts (and not hidden): the most
/// specific mount containing it decides.
pub fn is_visible(path: &Path, mounts: &[Mount]) -> bool {
    access_of(path, mounts).is_some_and(|access| access != Access::Exclude)
}

/// What the sandbox may do with `path`: the access of the most specific mount covering
/// it (`None`: not mounted at all).
pub fn access_of(path: &Path, mounts: &[Mount]) -> Option<Access> {
    mounts
        .iter()
        .filter(|mount| path.starts_with(&mount.path))
        .max_by_key(|mount| mount.path.components().count())
        .map(|mount| mount.access)
}

fn is_glob(text: &str) -> bool {
    text.contains(['*', '?', '['])
}

/// `~` → home; relative → the effective cwd for a command-line flag, the project root
/// for a config file (a project's `"exclude": ["fixtures/dump"]` must mean the same
/// path whichever subdirectory the agent starts in); then lexically normalized.
pub fn resolve_path(written: &str, ctx: &Context, origin: &Origin) -> PathBuf {
    let base = match origin.layer {
        LayerKind::Cli => &ctx.cwd,
        _ => &ctx.project_root,
    };
    let joined = if written == "~" {
        ctx.home.clone()
    } else if let Some(rest) = written.strip_prefix("~/") {
        ctx.home.join(rest)
    } else {
        base.join(written)
    };
    normalize(&joined)
}

pub use gitfacts::normalize;

/// Existing paths for `pattern`: the path itself if it exists, or the glob's matches.
fn expand_pattern(pattern: &Path, written: &str, origin: &Origin) -> Result<Vec<(PathBuf, bool)>, PolicyError> {
    let text = pattern.to_string_lossy();
    if !is_glob(&text) {
        return Ok(if pattern.exists() { vec![(pattern.to_path_buf(), true)] } else { Vec::new() });
    }
    let paths = glob::glob(&text).map_err(|err| PolicyError::Glob {
        pattern: written.to_owned(),
        origin: origin.clone(),
        message: err.msg.to_owned(),
    })?;
    // Unreadable directories while globbing are skipped: they cannot be granted anyway.
    Ok(paths.filter_map(Result::ok).map(|path| (path, false)).collect())
}

#[cfg(test)]
mod tests;
