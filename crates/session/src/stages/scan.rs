//! The scan stage: the policy's mounts (with the tools installed under the home shown
//! read-only), the one secret scan of the project at the start (which also lists git's
//! entries and the copies of host-run files, so the session check needs no walk of its
//! own), the index blobs of what it found, and the masks decided from those facts
//! (`masks::decide`). The same listing is taken again, the same cached way, by the exit
//! check ([`Lister`]): from the start's listings kept in memory, so the exit stats each
//! directory and reads only the entries of those changed since.

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
    sync::{Mutex, PoisonError},
};

use anyhow::Result;
use sandbox::plan::Mask;

use super::facts::{builtin_path, Facts};
use crate::{index, installs, mask_record, masks, trees};

/// What the scan found and decided.
pub(crate) struct Scanned {
    /// The configuration with what this stage adds (installations shown read-only).
    pub(crate) config: config::Config,
    pub(crate) policy: policy::Policy,
    /// Git's entries and copies of host-run files, for the session check.
    pub(crate) found: gitcare::walk::Found,
    pub(crate) masked: Vec<masks::Masked>,
    pub(crate) masks: Vec<Mask>,
    /// What earlier sessions masked, and where this one's record goes.
    pub(crate) earlier: masks::Earlier,
    pub(crate) record_dir: PathBuf,
    /// Masked files whose parents are pinned.
    pub(crate) pinned_masks: Vec<PathBuf>,
    /// Copies of host-run files in subdirectories, read-only with their parents pinned.
    pub(crate) host_copies: Vec<PathBuf>,
    pub(crate) lister: Lister,
}

/// How the project is listed: at the start, and by the exit check.
pub(crate) struct Lister {
    root: PathBuf,
    matcher: secrets::SecretMatcher,
    skip: Vec<PathBuf>,
    /// The start's listings stay in memory for the exit check, which then only stats
    /// each directory (reading the entries of those changed since).
    cache: Mutex<secrets::ScanCache>,
    copy_names: Vec<OsString>,
}

impl Lister {
    /// The cached scan, split into git's entries and the secrets.
    fn list(&self) -> Result<(gitcare::walk::Found, Vec<secrets::SecretHit>)> {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let hits = secrets::scan_cached(&self.root, &self.matcher, &self.skip, &mut cache)?;
        Ok(split_git_entries(&self.root, &self.copy_names, hits))
    }

    /// What the session left behind, listed the same (cached) way; when the scan fails
    /// (a directory made unreadable), the fail-closed walk, which makes it readable
    /// again or reports it for quarantine.
    pub(crate) fn found_now(&self) -> gitcare::walk::Found {
        match self.list() {
            Ok((found, _)) => found,
            Err(_) => {
                let mut found = gitcare::walk::Found::default();
                gitcare::walk::walk(&self.root, &self.copy_names, &mut found);
                for dir in &found.repaired {
                    util::say!(
                        "agent-sandbox: note: {} was made unreadable inside the sandbox; gave its owner read and \
                         search permission back so that it could be checked",
                        dir.display()
                    );
                }
                found
            }
        }
    }
}

pub(crate) fn scan(facts: &Facts, config: config::Config, debug: &dyn Fn(&str)) -> Result<Scanned> {
    let ctx = &facts.ctx;
    let (config, mut policy) = resolve(facts, config, debug)?;
    let lister = lister(facts, &config, &policy)?;
    let (found, hits) = lister.list()?;
    let index = facts.repo.as_ref().and_then(|_| index::Index::load(&ctx.project_root));
    let hit_facts = index::hit_facts(&ctx.project_root, hits, index.as_ref());
    // What a rename cannot arrange decides the dependency trees' exemption: the tool's
    // marker, and what earlier sessions masked (by inode).
    let record_dir = gitcare::session::project_dir(&facts.state_dir, &ctx.project_root);
    let earlier = mask_record::read(&record_dir);
    let trees = trees::made_trees(
        &ctx.project_root,
        hit_facts.iter().flat_map(|fact| {
            std::iter::once(fact.hit.path.as_path()).chain(fact.target.as_ref().map(|(target, _)| target.as_path()))
        }),
    );
    let (masked, mask_notes) = masks::decide(&hit_facts, &trees, &earlier, &policy.mounts);
    policy.notes.extend(mask_notes);
    let masks: Vec<Mask> = masked.iter().map(|masked| masked.mask.clone()).collect();
    // A masked file that a rename could unmask stays where it is: its parents are pinned
    // up to the project, so that `mv certs target` cannot carry it where the next start
    // would not mask it (`Masked::pin` says which: not inside a dependency tree its tool
    // made, which must stay deletable for `npm ci`).
    let pinned_masks: Vec<PathBuf> =
        masked.iter().filter(|masked| masked.pin).map(|masked| masked.mask.path.clone()).collect();
    policy::pin_parents(&mut policy.mounts, &pinned_masks);
    let host_copies = host_copies(&facts.watch, &found, &mut policy, debug);
    Ok(Scanned { config, policy, found, masked, masks, earlier, record_dir, pinned_masks, host_copies, lister })
}

/// The policy's mounts. Tools installed under the home directory (`npm --prefix
/// ~/.local`, pipx) are symlinks in a visible PATH directory to an installation that is
/// not: those installations are shown read-only.
fn resolve(
    facts: &Facts,
    mut config: config::Config,
    debug: &dyn Fn(&str),
) -> Result<(config::Config, policy::Policy)> {
    let ctx = &facts.ctx;
    let mut policy = policy::resolve(&config, ctx)?;
    let installs = installs::hidden_installations(std::env::var_os("PATH").as_deref(), &ctx.home, &policy.mounts);
    if !installs.is_empty() {
        for dir in &installs {
            debug(&format!("tools: {} shown read-only (a PATH entry leads there)", dir.display()));
            config.ro.push(builtin_path(dir));
        }
        policy = policy::resolve(&config, ctx)?;
    }
    policy::pin_parents(&mut policy.mounts, &facts.host_present);
    Ok((config, policy))
}

/// `.git` entries are reported too (never descended into), and `HEAD` files, for the
/// session check; `.git` before any secret or allow pattern (`.g*`) can claim it.
fn lister(facts: &Facts, config: &config::Config, policy: &policy::Policy) -> Result<Lister> {
    let root = &facts.ctx.project_root;
    let copy_names = facts.watch.copy_names();
    let patterns: Vec<String> = config.secret_patterns.iter().map(|item| item.value.clone()).collect();
    let matcher = secrets::SecretMatcher::new(
        &patterns,
        &config.secret_allow.iter().map(|item| item.value.clone()).collect::<Vec<_>>(),
    )?
    .with_markers(&[GIT_ENTRY], &[HEAD_ENTRY])
    .with_copies(&copy_names.iter().filter_map(|name| name.to_str()).collect::<Vec<_>>());
    let skip: Vec<PathBuf> = policy
        .mounts
        .iter()
        .filter(|mount| mount.access == policy::Access::Exclude && mount.path.starts_with(root))
        // An excluded directory with a grant inside is scanned: the grant is visible.
        .filter(|mount| !sandbox::plan::has_descendants(mount, &policy.mounts))
        .map(|mount| mount.path.clone())
        .collect();
    let cache = facts.cache_dir.join("scan").join(format!("{:016x}", util::fnv1a(root.as_os_str().as_encoded_bytes())));
    let cache = Mutex::new(secrets::ScanCache::new(&cache));
    Ok(Lister { root: root.clone(), matcher, skip, cache, copy_names })
}

/// Copies of host-run files in subdirectories (`sub/.envrc`, `web/.vscode/tasks.json`):
/// read-only with their parents pinned, like the root's; one made inside is moved aside
/// by the exit check. A symlink cannot be held by a mount: the check compares it.
fn host_copies(
    watch: &gitcare::Watch,
    found: &gitcare::walk::Found,
    policy: &mut policy::Policy,
    debug: &dyn Fn(&str),
) -> Vec<PathBuf> {
    let host_copies: Vec<PathBuf> = gitcare::host_copies(watch, found)
        .into_iter()
        .filter(|path| path.symlink_metadata().is_ok_and(|meta| !meta.is_symlink()))
        .collect();
    for path in &host_copies {
        debug(&format!("hostExecuted: {} read-only (a copy in a subdirectory)", path.display()));
        policy.mounts.push(policy::Mount {
            path: path.clone(),
            access: policy::Access::Ro,
            kind: if path.is_dir() { policy::Kind::Dir } else { policy::Kind::File },
            link: None,
            rule: "filesystem.hostExecuted (a copy in a subdirectory)".into(),
            origin: config::Origin::builtin(),
        });
    }
    policy::pin_parents(&mut policy.mounts, &host_copies);
    host_copies
}

/// The scan pattern that finds git directories and gitlinks in the work tree.
const GIT_ENTRY: &str = ".git";

/// The scan pattern that finds what may make a directory a bare repository.
const HEAD_ENTRY: &str = "HEAD";

/// Splits scan hits into the git entries (for the session check) and the secrets.
/// Secret directories are not descended into by the scan (masked or not, the agent may
/// have made them): they are walked for `.git` and `HEAD` here, fail-closed.
fn split_git_entries(
    root: &Path,
    copy_names: &[OsString],
    hits: Vec<secrets::SecretHit>,
) -> (gitcare::walk::Found, Vec<secrets::SecretHit>) {
    let mut found = gitcare::walk::Found::default();
    let mut secrets = Vec::new();
    for hit in hits {
        match hit.pattern.as_str() {
            GIT_ENTRY if hit.path != root.join(GIT_ENTRY) => found.nested.push(hit.path),
            GIT_ENTRY => {}
            HEAD_ENTRY => found.heads.push(hit.path),
            secrets::COPY_PATTERN => found.copies.push(hit.path),
            _ => {
                if hit.kind == secrets::EntryKind::Dir {
                    gitcare::walk::walk(&hit.path, copy_names, &mut found);
                }
                secrets.push(hit);
            }
        }
    }
    (found, secrets)
}
