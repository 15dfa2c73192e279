//! The caches' layers of one session (`sandbox::caches`): `@caches` directories are
//! overlays whose layers live in the state directory, or read-only; never the host's
//! own, read-write.

use std::{
    os::unix::fs::DirBuilderExt,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};
use policy::Mount;

/// The `@caches` directories the policy grants read-write (the preset's rule won).
pub(crate) fn cache_paths(mounts: &[Mount]) -> Vec<PathBuf> {
    mounts
        .iter()
        .filter(|mount| mount.access == policy::Access::Rw && mount.rule.starts_with("@caches:"))
        .map(|mount| mount.path.clone())
        .collect()
}

pub(crate) fn make_read_only(mounts: &mut [Mount], path: &Path) {
    for mount in mounts.iter_mut().filter(|mount| mount.path == path) {
        mount.access = policy::Access::Ro;
    }
}

/// The caches' layers for one session (`sandbox::caches`): the persistent ones under
/// the state directory's `caches/`, held by a lock while the session runs; a session
/// starting while another holds them stacks layers of its own on them, removed at its
/// end.
pub(crate) struct CacheLayers {
    pub(crate) root: PathBuf,
    pub(crate) mounts: Vec<sandbox::caches::CacheMount>,
    _lock: Option<std::fs::File>,
    /// This session's own layers (and their lock), removed when dropped.
    own: Option<(PathBuf, std::fs::File)>,
}

impl CacheLayers {
    pub(crate) fn take(
        state_dir: &Path,
        home: &Path,
        mounts: &[Mount],
        restricted: bool,
        dry_run: bool,
    ) -> Result<CacheLayers> {
        let root = state_dir.join(CACHE_LAYERS);
        let caches = cache_paths(mounts);
        let unavailable = restricted.then_some(
            "this machine keeps user namespaces from programs without an AppArmor profile \
             (kernel.apparmor_restrict_unprivileged_userns = 1)",
        );
        let mut layers = CacheLayers { root: root.clone(), mounts: Vec::new(), _lock: None, own: None };
        let plan = |session: Option<&Path>| {
            sandbox::caches::plan(&caches, &sandbox::caches::Layers { root: &root, home, session }, unavailable)
        };
        if dry_run || caches.is_empty() || unavailable.is_some() {
            layers.mounts = plan(None);
            return Ok(layers);
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&root)
            .with_context(|| format!("creating {}", root.display()))?;
        let lock = util::fs::lock(&root.join(CACHE_LOCK), false)
            .with_context(|| format!("locking {}", root.join(CACHE_LOCK).display()))?;
        if lock.is_some() {
            remove_stale_session_layers(&root);
            layers._lock = lock;
            layers.mounts = plan(None);
        } else {
            let dir = root.join(format!("{CACHE_SESSION_PREFIX}{}", std::process::id()));
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&dir)
                .with_context(|| format!("creating {}", dir.display()))?;
            let own_lock = util::fs::lock(&dir.join(CACHE_LOCK), false)
                .with_context(|| format!("locking {}", dir.display()))?
                .with_context(|| format!("locking {}", dir.display()))?;
            layers.mounts = plan(Some(&dir));
            layers.own = Some((dir, own_lock));
        }
        if let Err(err) = sandbox::caches::create_layers(&layers.mounts) {
            let why = format!("its layer cannot be made under {}: {err}", root.display());
            layers.mounts = caches
                .iter()
                .map(|path| sandbox::caches::CacheMount::ReadOnly { path: path.clone(), why: why.clone() })
                .collect();
        }
        Ok(layers)
    }
}

impl Drop for CacheLayers {
    fn drop(&mut self) {
        if let Some((dir, _)) = &self.own {
            sandbox::caches::remove_session_layers(dir);
        }
    }
}

/// Removes the layers of concurrent sessions that are gone (their lock is free).
fn remove_stale_session_layers(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else { return };
    for entry in entries.flatten() {
        let stale = entry.file_name().to_string_lossy().starts_with(CACHE_SESSION_PREFIX)
            && matches!(util::fs::lock(&entry.path().join(CACHE_LOCK), false), Ok(Some(_)));
        if stale {
            sandbox::caches::remove_session_layers(&entry.path());
        }
    }
}

/// The caches' layers in the state directory (`sandbox::caches::layer_name` inside).
pub const CACHE_LAYERS: &str = "caches";
const CACHE_LOCK: &str = "lock";
const CACHE_SESSION_PREFIX: &str = ".session-";
