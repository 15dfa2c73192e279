//! Which dependency trees in the project their tools made (`masks::DEPENDENCY_TREES`):
//! the gathering half of the exemption, a few `lstat`s. Each directory named like a
//! tree is looked at once, however many hits lie inside it; nothing is opened or read,
//! so a marker the agent replaced by a FIFO cannot block the start.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use crate::masks::{DependencyTree, MadeTree, DEPENDENCY_TREES};

/// For each of `paths` under `root`: the outermost directory on its way down from `root`
/// that is named like a dependency tree and holds that tree's marker, a regular file.
/// Each made tree once.
pub fn made_trees<'a>(root: &Path, paths: impl Iterator<Item = &'a Path>) -> Vec<MadeTree> {
    let mut looked: HashMap<PathBuf, Option<&'static DependencyTree>> = HashMap::new();
    let mut made: Vec<MadeTree> = Vec::new();
    for path in paths {
        let Ok(rel) = path.strip_prefix(root) else { continue };
        let mut dir = root.to_path_buf();
        // The entry itself is not a tree it lies in.
        let parents = rel.parent().map(Path::components).into_iter().flatten();
        for part in parents {
            dir.push(part);
            if !DEPENDENCY_TREES.iter().any(|tree| part.as_os_str() == tree.name) {
                continue;
            }
            let tree = *looked.entry(dir.clone()).or_insert_with(|| marker_of(&dir, part.as_os_str()));
            if let Some(tree) = tree {
                if !made.iter().any(|known| known.dir == dir) {
                    made.push(MadeTree { dir: dir.clone(), tree });
                }
                break;
            }
        }
    }
    made
}

/// The row whose marker `dir` (named `name`) holds, if any.
fn marker_of(dir: &Path, name: &std::ffi::OsStr) -> Option<&'static DependencyTree> {
    let is_dir = dir.symlink_metadata().is_ok_and(|meta| meta.is_dir());
    DEPENDENCY_TREES
        .iter()
        .filter(|tree| name == tree.name)
        .find(|tree| is_dir && dir.join(tree.marker).symlink_metadata().is_ok_and(|meta| meta.is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_counts_only_with_its_own_marker_as_a_regular_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        let touch = |rel: &str| {
            let path = root.join(rel);
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
            std::fs::write(&path, "").expect("write");
            path
        };
        let npm_hit = touch("node_modules/a/node_modules/b/secret.js");
        touch("node_modules/.package-lock.json");
        let cargo_hit = touch("target/debug/x.key");
        touch("target/CACHEDIR.TAG");
        // A marker of another tree, and a marker that is a directory, make nothing.
        let wrong_marker = touch("vendor/k.pem");
        touch("vendor/pyvenv.cfg");
        let dir_marker = touch(".venv/lib/k.pem");
        std::fs::create_dir(root.join(".venv/pyvenv.cfg")).expect("mkdir");
        // A file named like a tree is no tree.
        let named = touch("x/target");
        let paths = [&npm_hit, &cargo_hit, &wrong_marker, &dir_marker, &named, &npm_hit];
        let made = made_trees(root, paths.iter().map(|path| path.as_path()));
        let got: Vec<(PathBuf, &str)> = made.iter().map(|made| (made.dir.clone(), made.tree.tool)).collect();
        assert_eq!(got, [(root.join("node_modules"), "npm"), (root.join("target"), "cargo")]);
    }
}
