//! `@caches` as overlays: the sandbox's writes to a shared cache (`~/.cargo/registry`,
//! `~/go/pkg/mod`, …) go to a layer of its own in agent-sandbox's state directory,
//! kept across sessions, while reads fall through to the host's cache; the host's cache
//! never receives what the agent wrote (a planted `build.rs` in an extracted crate would
//! run in the next host build of any project).
//!
//! bwrap 0.8 has no overlay mounts, so the executor makes them between fork and exec of
//! bwrap, in a mount namespace of its own (inside a user namespace of its own for an
//! unprivileged user), over the cache path itself; bwrap's `--bind` of that path then
//! carries the overlay into the sandbox. [`plan`] decides every mount as a value;
//! [`Prepared::enter`] carries it out. Where an overlay cannot be made, the cache is
//! mounted read-only, never read-write: by the plan (`ReadOnly`, bwrap's `--ro-bind`)
//! when that is known before the start, by the executor (a read-only bind in its
//! namespace, reported back) when the kernel refuses the overlay.

use std::{
    ffi::CString,
    fs::File,
    io::Read,
    os::unix::{ffi::OsStrExt, io::RawFd},
    path::{Path, PathBuf},
};

/// What one `@caches` directory becomes in the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheMount {
    /// An overlay mounted over `path`: `lowers` top first, the host's cache (`path`
    /// itself) last; writes go to `upper` (`work` is overlayfs's scratch directory on
    /// the same filesystem).
    Overlay { path: PathBuf, lowers: Vec<PathBuf>, upper: PathBuf, work: PathBuf },
    /// Read-only in the sandbox, and why no overlay.
    ReadOnly { path: PathBuf, why: String },
}

impl CacheMount {
    pub fn path(&self) -> &Path {
        match self {
            CacheMount::Overlay { path, .. } | CacheMount::ReadOnly { path, .. } => path,
        }
    }

    /// One line for `--debug` and `--dry-run`.
    pub fn describe(&self) -> String {
        match self {
            CacheMount::Overlay { path, upper, .. } => {
                format!("cache {}: overlay, the sandbox's writes go to {}", path.display(), upper.display())
            }
            CacheMount::ReadOnly { path, why } => {
                format!("cache {}: read-only ({why}; downloads are not kept)", path.display())
            }
        }
    }
}

/// Where the layers live.
#[derive(Debug, Clone, Copy)]
pub struct Layers<'a> {
    /// The persistent layers: `<root>/<name>/{upper,work}` (see [`layer_name`]).
    pub root: &'a Path,
    pub home: &'a Path,
    /// When another session holds the persistent layers: this session's own layers
    /// (`<session>/<name>/{upper,work}`), stacked on the persistent one and removed at
    /// the end. overlayfs does not allow two mounts to share an upper directory.
    pub session: Option<&'a Path>,
}

/// The layer directory's name for the cache at `path`: its path under home with `/`
/// written `+` (`.cargo+registry`).
pub fn layer_name(home: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(home).unwrap_or(path);
    let text = rel.to_string_lossy();
    text.trim_start_matches('/').replace('/', "+")
}

/// The mount of every cache in `caches` (existing directories the policy grants
/// read-write through `@caches`). `unavailable`: why no overlay can be made at all here
/// (no namespace of agent-sandbox's own), which makes every cache read-only.
pub fn plan(caches: &[PathBuf], layers: &Layers<'_>, unavailable: Option<&str>) -> Vec<CacheMount> {
    caches
        .iter()
        .map(|path| {
            if let Some(why) = unavailable {
                return CacheMount::ReadOnly { path: path.clone(), why: why.to_owned() };
            }
            let shared = layers.root.join(layer_name(layers.home, path));
            let (lowers, own) = match layers.session {
                Some(session) => {
                    (vec![shared.join("upper"), path.clone()], session.join(layer_name(layers.home, path)))
                }
                None => (vec![path.clone()], shared),
            };
            let mount =
                CacheMount::Overlay { path: path.clone(), lowers, upper: own.join("upper"), work: own.join("work") };
            if overlay_data(&mount).is_none() {
                return CacheMount::ReadOnly {
                    path: path.clone(),
                    why: "its path or its layer's holds a character overlayfs options cannot carry (, : \\ or a \
                          newline)"
                        .into(),
                };
            }
            mount
        })
        .collect()
}

/// The overlayfs mount options of an overlay; `None` for paths the option syntax
/// cannot carry. `userxattr`: the layers' metadata in `user.overlay.*` attributes,
/// which an unprivileged user may set (and root alike, so a layer works for both).
pub fn overlay_data(mount: &CacheMount) -> Option<String> {
    let CacheMount::Overlay { lowers, upper, work, .. } = mount else { return None };
    let mut paths: Vec<&Path> = lowers.iter().map(PathBuf::as_path).collect();
    paths.extend([upper.as_path(), work.as_path()]);
    if paths.iter().any(|path| path.as_os_str().as_bytes().iter().any(|byte| b",:\\\n\0".contains(byte))) {
        return None;
    }
    let text = |path: &Path| path.to_string_lossy().into_owned();
    let lowerdir: Vec<String> = lowers.iter().map(|path| text(path)).collect();
    Some(format!("lowerdir={},upperdir={},workdir={},userxattr", lowerdir.join(":"), text(upper), text(work)))
}

/// The overlays' directories, made before the start (owner only).
pub fn create_layers(mounts: &[CacheMount]) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    for mount in mounts {
        if let CacheMount::Overlay { lowers, upper, work, .. } = mount {
            for dir in lowers.iter().take(lowers.len().saturating_sub(1)).chain([upper, work]) {
                std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
            }
        }
    }
    Ok(())
}

/// Removes a session's own layers: overlayfs leaves `work/work` with mode 0, which its
/// owner must open up again first.
pub fn remove_session_layers(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let _ = std::fs::set_permissions(entry.path().join("work/work"), std::fs::Permissions::from_mode(0o700));
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// [`plan`]'s overlays ready for the child: every string made before the fork (nothing
/// may allocate between fork and exec).
#[derive(Debug, Clone)]
pub struct Prepared {
    /// Each cache's path and, for an overlay, its options.
    entries: Vec<(CString, Option<CString>)>,
    /// The user namespace to make first (an unprivileged caller whose network
    /// namespace, which would bring one, is not premade): uid and gid maps.
    user_maps: Option<(Vec<u8>, Vec<u8>)>,
}

impl Prepared {
    /// `None` when there is nothing to mount. `own_user_namespace`: make a user
    /// namespace first (mapping the caller's ids onto themselves).
    pub fn new(mounts: &[CacheMount], own_user_namespace: bool) -> Option<Prepared> {
        let entries: Vec<(CString, Option<CString>)> = mounts
            .iter()
            .filter(|mount| matches!(mount, CacheMount::Overlay { .. }))
            .filter_map(|mount| {
                let path = CString::new(mount.path().as_os_str().as_bytes()).ok()?;
                Some((path, overlay_data(mount).and_then(|data| CString::new(data).ok())))
            })
            .collect();
        if entries.is_empty() {
            return None;
        }
        let user_maps = own_user_namespace.then(|| {
            // SAFETY: geteuid and getegid have no preconditions.
            let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
            (format!("{uid} {uid} 1\n").into_bytes(), format!("{gid} {gid} 1\n").into_bytes())
        });
        Some(Prepared { entries, user_maps })
    }

    /// The paths of the overlays, in the order [`Prepared::enter`] reports them.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.entries.iter().map(|(path, _)| PathBuf::from(std::ffi::OsStr::from_bytes(path.as_bytes()))).collect()
    }

    /// Makes the namespaces and mounts every overlay; an overlay the kernel refuses is
    /// replaced by a read-only bind of the cache onto itself and reported on `report`
    /// (its index, then the errno, native-endian). Fails only when not even that can be
    /// made: then bwrap does not start.
    ///
    /// # Safety
    /// Call only in a single-threaded child between fork and exec (`pre_exec`).
    pub unsafe fn enter(&self, report: RawFd) -> std::io::Result<()> {
        // SAFETY: the caller's contract; every pointer passed below is to a live,
        // NUL-terminated string or a buffer of the length given.
        unsafe {
            if let Some((uid_map, gid_map)) = &self.user_maps {
                crate::netns::enter_user_namespace(0, uid_map, gid_map)?;
            }
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Nothing mounted here may reach the host's namespace.
            if libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            for (index, (path, data)) in self.entries.iter().enumerate() {
                if let Some(data) = data {
                    if libc::mount(c"overlay".as_ptr(), path.as_ptr(), c"overlay".as_ptr(), 0, data.as_ptr().cast())
                        == 0
                    {
                        continue;
                    }
                }
                let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
                let mut record = [0u8; 5];
                record[0] = u8::try_from(index).unwrap_or(FAILED - 1);
                record[1..].copy_from_slice(&errno.to_ne_bytes());
                libc::write(report, record.as_ptr().cast(), record.len());
                read_only_bind(path)?;
            }
            Ok(())
        }
    }
}

/// A read-only bind of `path` onto itself, keeping the flags a user namespace may not
/// clear (nosuid, nodev, noexec, atime).
unsafe fn read_only_bind(path: &CString) -> std::io::Result<()> {
    // SAFETY: a NUL-terminated path; statvfs writes into the zeroed struct.
    unsafe {
        if libc::mount(path.as_ptr(), path.as_ptr(), std::ptr::null(), libc::MS_BIND | libc::MS_REC, std::ptr::null())
            != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        let mut stat: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(path.as_ptr(), &mut stat) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // The kernel's ST_RELATIME (the libc crate names it for glibc only, not for musl,
        // which the Feature's static binary is built against).
        const ST_RELATIME: libc::c_ulong = 0x1000;
        let kept =
            libc::ST_NOSUID | libc::ST_NODEV | libc::ST_NOEXEC | libc::ST_NOATIME | libc::ST_NODIRATIME | ST_RELATIME;
        let flags = (stat.f_flag & kept) as libc::c_ulong | libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY;
        if libc::mount(std::ptr::null(), path.as_ptr(), std::ptr::null(), flags, std::ptr::null()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

/// What [`Prepared::enter`] reported.
#[derive(Debug, Default)]
pub struct Report {
    /// Each overlay the kernel refused (mounted read-only instead), with the error.
    pub refused: Vec<(PathBuf, std::io::Error)>,
    /// `enter` itself failed (its namespace or a read-only bind): bwrap did not start.
    pub failed: bool,
}

/// The record [`report_failure`] writes in place of an index.
const FAILED: u8 = u8::MAX;

/// Records on `report` that [`Prepared::enter`] failed, so that the error names the
/// caches rather than another step between fork and exec.
pub fn report_failure(report: RawFd) {
    let record = [FAILED, 0, 0, 0, 0];
    // SAFETY: write(2) of a 5-byte buffer; async-signal-safe.
    unsafe { libc::write(report, record.as_ptr().cast(), record.len()) };
}

/// Reads what [`Prepared::enter`] reported on the pipe's other end.
pub fn read_report(mut report: File, paths: &[PathBuf]) -> Report {
    let mut bytes = Vec::new();
    let _ = report.read_to_end(&mut bytes);
    let mut result = Report::default();
    for record in bytes.chunks_exact(5) {
        if record[0] == FAILED {
            result.failed = true;
            continue;
        }
        let Some(path) = paths.get(usize::from(record[0])) else { continue };
        let errno = i32::from_ne_bytes([record[1], record[2], record[3], record[4]]);
        result.refused.push((path.clone(), std::io::Error::from_raw_os_error(errno)));
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caches() -> Vec<PathBuf> {
        vec![PathBuf::from("/home/u/.cargo/registry"), PathBuf::from("/home/u/go/pkg/mod")]
    }

    #[test]
    fn each_cache_gets_its_persistent_layer() {
        let layers = Layers {
            root: Path::new("/home/u/.local/state/agent-sandbox/caches"),
            home: Path::new("/home/u"),
            session: None,
        };
        let state = "/home/u/.local/state/agent-sandbox/caches";
        assert_eq!(
            plan(&caches(), &layers, None),
            vec![
                CacheMount::Overlay {
                    path: "/home/u/.cargo/registry".into(),
                    lowers: vec!["/home/u/.cargo/registry".into()],
                    upper: format!("{state}/.cargo+registry/upper").into(),
                    work: format!("{state}/.cargo+registry/work").into(),
                },
                CacheMount::Overlay {
                    path: "/home/u/go/pkg/mod".into(),
                    lowers: vec!["/home/u/go/pkg/mod".into()],
                    upper: format!("{state}/go+pkg+mod/upper").into(),
                    work: format!("{state}/go+pkg+mod/work").into(),
                },
            ]
        );
    }

    #[test]
    fn a_concurrent_session_stacks_a_layer_of_its_own_on_the_persistent_one() {
        let layers = Layers {
            root: Path::new("/s/caches"),
            home: Path::new("/home/u"),
            session: Some(Path::new("/s/caches/.session-1")),
        };
        assert_eq!(
            plan(&caches()[..1], &layers, None),
            vec![CacheMount::Overlay {
                path: "/home/u/.cargo/registry".into(),
                lowers: vec!["/s/caches/.cargo+registry/upper".into(), "/home/u/.cargo/registry".into()],
                upper: "/s/caches/.session-1/.cargo+registry/upper".into(),
                work: "/s/caches/.session-1/.cargo+registry/work".into(),
            }]
        );
        assert_eq!(
            overlay_data(&plan(&caches()[..1], &layers, None)[0]).as_deref(),
            Some(
                "lowerdir=/s/caches/.cargo+registry/upper:/home/u/.cargo/registry,\
                 upperdir=/s/caches/.session-1/.cargo+registry/upper,\
                 workdir=/s/caches/.session-1/.cargo+registry/work,userxattr"
            )
        );
    }

    #[test]
    fn without_an_overlay_a_cache_is_read_only_never_writable() {
        let layers = Layers { root: Path::new("/s/caches"), home: Path::new("/home/u"), session: None };
        assert_eq!(
            plan(&caches()[..1], &layers, Some("no user namespaces")),
            vec![CacheMount::ReadOnly { path: "/home/u/.cargo/registry".into(), why: "no user namespaces".into() }]
        );
        let odd = Layers { root: Path::new("/s/a,b"), home: Path::new("/home/u"), session: None };
        let planned = plan(&caches()[..1], &odd, None);
        assert!(
            matches!(&planned[0], CacheMount::ReadOnly { why, .. } if why.contains("overlayfs options")),
            "{planned:?}"
        );
        assert!(Prepared::new(&planned, false).is_none());
    }
}
