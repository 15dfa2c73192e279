//! `/proc/self/mountinfo`, read: which paths are mount points, which mounts are
//! read-only. One parser for the container's push verifier (the project is the work
//! tree whose `.git/config` is a read-only mount) and `agent-sandbox test` (protected
//! paths' parents are pinned).

use std::path::PathBuf;

/// One line of mountinfo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The mount's id (the first field; `/proc/self/fdinfo/N` names it as `mnt_id`).
    pub id: u64,
    /// The device (`major:minor`) and the directory of it that is mounted (the root of
    /// a bind mount's source, as the kernel names it on that device).
    pub device: String,
    pub root: PathBuf,
    pub point: PathBuf,
    pub read_only: bool,
}

/// The mounts `mountinfo` lists, the one seen at each path only (the last one there).
pub fn parse(mountinfo: &str) -> Vec<Mount> {
    let mut seen: Vec<Mount> = Vec::new();
    for line in mountinfo.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let (Some(id), Some(device), Some(root), Some(point), Some(options)) =
            (fields.first(), fields.get(2), fields.get(3), fields.get(4), fields.get(5))
        else {
            continue;
        };
        let Ok(id) = id.parse() else { continue };
        let point = PathBuf::from(unescape(point));
        let read_only = options.split(',').any(|option| option == "ro");
        seen.retain(|earlier| earlier.point != point);
        seen.push(Mount { id, device: (*device).to_owned(), root: unescape(root).into(), point, read_only });
    }
    seen
}

/// This process's mounts (none when they cannot be read).
pub fn current() -> Vec<Mount> {
    std::fs::read_to_string("/proc/self/mountinfo").map(|text| parse(&text)).unwrap_or_default()
}

/// The id of the mount `file` is on (`/proc/self/fdinfo`'s `mnt_id`, mountinfo's first
/// field): unlike its path, which a rename of a parent frees for another file.
pub fn mount_of(file: &std::fs::File) -> Option<u64> {
    use std::os::unix::io::AsRawFd;
    let fdinfo = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", file.as_raw_fd())).ok()?;
    fdinfo.lines().find_map(|line| line.strip_prefix("mnt_id:")).and_then(|id| id.trim().parse().ok())
}

/// mountinfo's octal escapes (`\040` for a blank).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .and_then(|digits| std::str::from_utf8(digits).ok().and_then(|digits| u8::from_str_radix(digits, 8).ok()));
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_mount_at_a_path_is_the_one_seen_and_escapes_are_read() {
        let mountinfo = "\
22 1 0:21 / / rw,relatime - overlay overlay rw
31 22 8:1 /x /srv/with\\040blank ro,relatime - ext4 /dev/sda1 rw
35 22 8:1 /y /srv/over ro,relatime - ext4 /dev/sda1 rw
36 22 8:1 /z /srv/over rw,relatime - ext4 /dev/sda1 rw
garbage";
        let mount = |id, device: &str, root: &str, point: &str, read_only| Mount {
            id,
            device: device.into(),
            root: root.into(),
            point: point.into(),
            read_only,
        };
        assert_eq!(
            parse(mountinfo),
            [
                mount(22, "0:21", "/", "/", false),
                mount(31, "8:1", "/x", "/srv/with blank", true),
                mount(36, "8:1", "/z", "/srv/over", false)
            ]
        );
    }

    /// A file's mount is one this process's mountinfo lists.
    #[test]
    fn a_files_mount_is_listed() {
        let file = std::fs::File::open("/proc/self/mountinfo").expect("open");
        let id = mount_of(&file).expect("mnt_id");
        assert!(current().iter().any(|mount| mount.id == id), "{id}");
    }
}
