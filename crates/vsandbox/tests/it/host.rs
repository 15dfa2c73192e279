//! Host import and export: a real temporary directory goes in through the limits and
//! comes back out unchanged; links leading outside are refused; export never writes
//! into a non-empty directory.

use std::{os::unix::fs::symlink, path::Path};

use vsandbox::{Config, Sandbox};

fn write(root: &Path, rel: &str, content: &[u8]) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, content).expect("write");
}

/// Every file under `root` with its bytes, and every directory, sorted.
fn tree(root: &Path) -> Vec<(String, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            let rel = path.strip_prefix(root).expect("under root").to_string_lossy().into_owned();
            if path.is_dir() {
                out.push((rel, None));
                stack.push(path);
            } else {
                out.push((rel, Some(std::fs::read(&path).expect("read"))));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_project_goes_in_and_comes_back_out_unchanged() {
    let host = tempfile::tempdir().expect("tempdir");
    write(host.path(), "README.md", b"# project\n");
    write(host.path(), "src/main.rs", b"fn main() {}\n");
    write(host.path(), "assets/logo.bin", &[0, 1, 2, 255]);
    std::fs::create_dir_all(host.path().join("empty")).expect("mkdir");
    let mut sandbox = Sandbox::new(Config::default()).expect("config");
    let report = sandbox.import_dir(host.path(), "/project").expect("import");
    assert_eq!((report.files, report.dirs, report.bytes, report.skipped.len()), (3, 3, 27, 0));
    let result = sandbox.execute("cd /project && find . -type f && cat src/main.rs");
    assert_eq!(result.stdout, "./README.md\n./assets/logo.bin\n./src/main.rs\nfn main() {}\n");
    let out = tempfile::tempdir().expect("tempdir");
    let exported = out.path().join("copy");
    let report = sandbox.export_dir("/project", &exported).expect("export");
    assert_eq!((report.files, report.dirs, report.bytes), (3, 3, 27));
    assert_eq!(tree(&exported), tree(host.path()));
    // The agent's changes are what comes out.
    sandbox.execute("echo changed > src/main.rs && rm README.md");
    let second = out.path().join("second");
    sandbox.export_dir("/project", &second).expect("export");
    assert_eq!(std::fs::read(second.join("src/main.rs")).expect("read"), b"changed\n");
    assert!(!second.join("README.md").exists());
}

#[test]
fn links_leading_outside_and_special_files_are_not_imported() {
    let outside = tempfile::tempdir().expect("tempdir");
    write(outside.path(), "secret", b"do not import\n");
    let host = tempfile::tempdir().expect("tempdir");
    write(host.path(), "inside.txt", b"inside\n");
    symlink(outside.path().join("secret"), host.path().join("leak")).expect("symlink");
    symlink(outside.path(), host.path().join("leakdir")).expect("symlink");
    symlink("inside.txt", host.path().join("alias")).expect("symlink");
    symlink(".", host.path().join("self")).expect("symlink");
    symlink("missing", host.path().join("broken")).expect("symlink");
    let mut sandbox = Sandbox::new(Config::default()).expect("config");
    let report = sandbox.import_dir(host.path(), "/").expect("import");
    assert_eq!(sandbox.execute("ls /").stdout, "alias\ninside.txt\n");
    assert_eq!(sandbox.execute("cat /alias").stdout, "inside\n", "a link to a file inside is copied as that file");
    let mut skipped: Vec<(String, String)> = report
        .skipped
        .iter()
        .map(|(path, reason)| (path.file_name().expect("name").to_string_lossy().into_owned(), reason.clone()))
        .collect();
    skipped.sort();
    assert_eq!(
        skipped,
        [
            (String::from("broken"), String::from("a broken symbolic link")),
            (String::from("leak"), String::from("a symbolic link leading outside the imported directory")),
            (String::from("leakdir"), String::from("a symbolic link leading outside the imported directory")),
            (String::from("self"), String::from("a symbolic link to a directory")),
        ]
    );
}

#[test]
fn export_refuses_a_non_empty_destination_and_import_a_file() {
    let mut sandbox = Sandbox::new(Config::default()).expect("config");
    sandbox.execute("mkdir /d && echo x > /d/f");
    let out = tempfile::tempdir().expect("tempdir");
    write(out.path(), "existing", b"keep\n");
    let err = sandbox.export_dir("/d", out.path()).expect_err("not empty");
    assert!(err.to_string().contains("exists and is not empty (export only into a new or empty directory)"), "{err}");
    assert_eq!(std::fs::read(out.path().join("existing")).expect("read"), b"keep\n");
    let err = sandbox.export_dir("/d/f", &out.path().join("existing")).expect_err("exists");
    assert!(err.to_string().contains("File exists"), "{err}");
    sandbox.export_dir("/d/f", &out.path().join("single")).expect("a single file");
    assert_eq!(std::fs::read(out.path().join("single")).expect("read"), b"x\n");
    let err = sandbox.import_dir(&out.path().join("single"), "/x").expect_err("not a directory");
    assert!(err.to_string().contains("not a directory (import takes a directory)"), "{err}");
    let err = sandbox.export_dir("/nope", &out.path().join("n")).expect_err("missing");
    assert!(err.to_string().contains("/nope: No such file or directory"), "{err}");
}
