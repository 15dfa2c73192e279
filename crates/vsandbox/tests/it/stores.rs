//! The persistent store: what one sandbox left in a store file, the next one opened on
//! it finds (files, working directory, environment); a second opener while the first
//! lives is refused; a store file holding more than the limits, or written by something
//! else, is refused whole, whoever wrote it, since the limits are checked above the store.

use redb::{Database, TableDefinition};
use vsandbox::{Config, Limits, RedbStore, Sandbox, Snapshot};

const NODES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("nodes");

fn open_store(path: &std::path::Path, config: Config) -> Result<Sandbox, vsandbox::Error> {
    let store = RedbStore::open(path).map_err(|err| vsandbox::Error::Fs(vsandbox::FsError::Storage(err.0)))?;
    Sandbox::open(config, Box::new(store))
}

fn state(sandbox: &Sandbox) -> Snapshot {
    Snapshot { timestamp: String::new(), ..sandbox.create_snapshot().expect("snapshot") }
}

#[test]
fn a_store_brings_back_files_working_directory_and_environment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.redb");
    let mut sandbox = open_store(&path, Config::default()).expect("a new store");
    for command in ["mkdir -p /w/src && cd /w", "echo hello > src/a.txt", "export GREETING=hi", "cp -r src copy"] {
        assert!(sandbox.execute(command).success, "{command}");
    }
    sandbox.write_file("/w/bin", &[0, 0xff, 1]).expect("write_file");
    let before = state(&sandbox);
    drop(sandbox);
    let mut again = open_store(&path, Config::default()).expect("the store again");
    assert_eq!(state(&again), before);
    assert_eq!(again.execute("cat copy/a.txt; echo $GREETING; pwd").stdout, "hello\nhi\n/w\n");
    assert_eq!(again.stats().node_count, 6);
}

#[test]
fn a_second_opener_is_refused_while_the_first_lives() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.redb");
    let mut first = open_store(&path, Config::default()).expect("a new store");
    first.execute("echo mine > /f");
    let err = RedbStore::open(&path).err().expect("the store is locked");
    assert!(err.to_string().contains("the store is open in another process"), "{err}");
    assert_eq!(first.execute("cat /f").stdout, "mine\n", "the first one is untouched");
    drop(first);
    assert!(RedbStore::open(&path).is_ok(), "free again once the first is gone");
}

#[test]
fn a_store_over_the_limits_is_refused_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.redb");
    let mut sandbox = open_store(&path, Config::default()).expect("a new store");
    assert!(sandbox.execute("mkdir -p /1/2/3/4/5/6/7/8/9/10/11").success);
    drop(sandbox);
    let small = Limits { max_total_size: 250, max_file_size: 100, max_node_count: 10 };
    let err = open_store(&path, Config { limits: small, ..Config::default() }).err().expect("11 nodes");
    assert!(err.to_string().contains("would hold 11 files and directories, over its limit of 10"), "{err}");
    assert!(open_store(&path, Config::default()).is_ok(), "still whole for the limits it was made with");
}

/// A file written into the store behind the sandbox's back (any program can edit the
/// store file): the sandbox counts for itself and refuses what is over a limit.
#[test]
fn a_store_edited_past_the_limits_is_refused_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.redb");
    drop(open_store(&path, Config::default()).expect("a new store"));
    let small = Limits { max_total_size: 250, max_file_size: 100, max_node_count: 10 };
    let cases: [(&[u8], Vec<u8>, &str); 4] = [
        (b"\0big", [&b"f"[..], &[b'x'; 101]].concat(), "the file would be 101 bytes, over the file size limit of 100"),
        (&[0; 1], b"d".to_vec(), "holds the name \"\", which no sandbox makes"),
        (b"\0a/b", b"d".to_vec(), "which no sandbox makes"),
        (b"\0odd", b"?".to_vec(), "unknown kind"),
    ];
    for (key, value, message) in cases {
        {
            let db = Database::create(&path).expect("redb");
            let txn = db.begin_write().expect("txn");
            {
                let mut table = txn.open_table(NODES).expect("table");
                table.retain(|_, _| false).expect("clear");
                table.insert(key, value.as_slice()).expect("insert");
            }
            txn.commit().expect("commit");
        }
        let err = open_store(&path, Config { limits: small, ..Config::default() }).err().expect(message);
        assert!(err.to_string().contains(message), "{message}: {err}");
    }
    // The legitimate use beside it: the same file within the limits opens.
    {
        let db = Database::create(&path).expect("redb");
        let txn = db.begin_write().expect("txn");
        {
            let mut table = txn.open_table(NODES).expect("table");
            table.retain(|_, _| false).expect("clear");
            table.insert(&b"\0ok"[..], &[&b"f"[..], &[b'x'; 100]].concat()[..]).expect("insert");
        }
        txn.commit().expect("commit");
    }
    let mut sandbox = open_store(&path, Config { limits: small, ..Config::default() }).expect("within the limits");
    assert_eq!(sandbox.execute("wc -c /ok").stdout, "100 /ok\n");
}

#[test]
fn a_file_that_is_not_a_store_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("snapshot.json");
    std::fs::write(&path, "{\"format\": \"agent-sandbox-vsandbox-snapshot\"}").expect("write");
    let err = RedbStore::open(&path).err().expect("not a redb file");
    assert!(err.to_string().contains("cannot open the store"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).expect("read"), "{\"format\": \"agent-sandbox-vsandbox-snapshot\"}");
}

/// The store contract `FileSystem::atomically` relies on, on each store: `rollback`
/// puts back the state at `begin` whatever happened since (changes, a `clear`), and
/// `commit` keeps it.
#[test]
fn rollback_puts_back_the_state_at_begin_on_each_store() {
    use vsandbox::{fs::Metadata, MemoryStore, Store};
    let dir = tempfile::tempdir().expect("tempdir");
    let stores: Vec<Box<dyn Store>> =
        vec![Box::new(MemoryStore::new()), Box::new(RedbStore::open(&dir.path().join("s.redb")).expect("store"))];
    for mut store in stores {
        let name = store.describe();
        store.create_dir(&["d"]).expect("mkdir");
        store.write(&["d", "f"], b"one", false).expect("write");
        store.commit().expect("commit");
        let listing = |store: &dyn Store| store.read_dir(&[]).expect("ls /");
        let before = listing(&*store);
        assert_eq!(before, [(String::from("d"), Metadata::Dir { entries: 1 })], "{name}");

        store.begin().expect("begin");
        store.write(&["d", "f"], b"+two", true).expect("append");
        store.rename(&["d"], &["e"]).expect("rename");
        store.set_attribute("shell", b"x").expect("attribute");
        store.rollback().expect("rollback");
        assert_eq!(listing(&*store), before, "{name}: changes undone");
        assert_eq!(&*store.read(&["d", "f"]).expect("read"), b"one", "{name}");
        assert_eq!(store.attribute("shell").expect("attribute"), None, "{name}");

        store.begin().expect("begin");
        store.clear().expect("clear");
        assert_eq!(store.metadata(&[]).expect("stat /"), Some(Metadata::Dir { entries: 0 }), "{name}");
        store.rollback().expect("rollback");
        assert_eq!(listing(&*store), before, "{name}: a clear undone");

        store.begin().expect("begin");
        store.remove(&["d"]).expect("rm -r");
        store.commit().expect("commit");
        assert_eq!(listing(&*store), [], "{name}: a commit keeps the change");
    }
}
