//! Fixtures of the writer's integration tests: a root, a state dir and an
//! "outside" directory side by side in one temporary directory, and a
//! snapshot of a whole tree to compare before and after.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serverfs_core::{Policy, Root, RootOptions, SymlinkRule};
use serverfs_write::{Writer, WriterConfig};

pub struct Fixture {
    pub tmp: tempfile::TempDir,
    pub root_dir: PathBuf,
    pub state: PathBuf,
    pub outside: PathBuf,
    pub writer: Arc<Writer>,
}

/// serverfs-dev's configuration: hidden files allowed, `.git` denied, and
/// links inside the root followed *for reads* — which must change nothing
/// for writes.
pub fn fixture() -> Fixture {
    fixture_with(|c| c)
}

pub fn fixture_with(config: impl FnOnce(WriterConfig) -> WriterConfig) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let root_dir = tmp.path().join("root");
    let state = tmp.path().join("state");
    let outside = tmp.path().join("outside");
    for d in [&root_dir, &outside] {
        std::fs::create_dir(d).unwrap();
    }
    let writer = Arc::new(open_writer(&root_dir, &state, config));
    Fixture { tmp, root_dir, state, outside, writer }
}

pub fn open_root(root_dir: &Path) -> Arc<Root> {
    let policy = Policy::new(true, &[".git/**".to_owned(), ".git".to_owned()]).unwrap();
    let options = RootOptions::new("w", policy).symlinks(SymlinkRule::FollowWithinRoot);
    Arc::new(Root::open(root_dir, options).unwrap())
}

pub fn open_writer(
    root_dir: &Path,
    state: &Path,
    config: impl FnOnce(WriterConfig) -> WriterConfig,
) -> Writer {
    let (writer, report) =
        Writer::open(open_root(root_dir), config(WriterConfig::new(root_dir, state))).unwrap();
    assert!(report.recovered.is_empty(), "{report:?}");
    writer
}

impl Fixture {
    pub fn put(&self, rel: &str, bytes: &[u8], mode: u32) {
        let path = self.root_dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    pub fn read(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.root_dir.join(rel)).unwrap()
    }

    pub fn mode(&self, rel: &str) -> u32 {
        std::fs::symlink_metadata(self.root_dir.join(rel)).unwrap().permissions().mode() & 0o7777
    }

    /// Root, outside dir and journal files, all at once.
    pub fn snapshot(&self) -> (Tree, Tree, Vec<String>) {
        (snapshot(&self.root_dir), snapshot(&self.outside), journals(&self.state))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    File { bytes: Vec<u8>, mode: u32 },
    Dir { mode: u32 },
    Link { target: PathBuf },
    Other,
}

pub type Tree = BTreeMap<String, Node>;

/// Every entry under `dir` (relative path → what it is), links not
/// followed.
pub fn snapshot(dir: &Path) -> Tree {
    fn walk(base: &Path, dir: &Path, out: &mut Tree) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap()).collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for e in entries {
            let path = e.path();
            let rel = path.strip_prefix(base).unwrap().to_string_lossy().into_owned();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            let node = if meta.file_type().is_symlink() {
                Node::Link { target: std::fs::read_link(&path).unwrap() }
            } else if meta.is_dir() {
                walk(base, &path, out);
                Node::Dir { mode }
            } else if meta.is_file() {
                Node::File { bytes: std::fs::read(&path).unwrap(), mode }
            } else {
                Node::Other
            };
            out.insert(rel, node);
        }
    }
    let mut out = Tree::new();
    walk(dir, dir, &mut out);
    out
}

/// Journal files (and their temporaries) in a state dir.
pub fn journals(state: &Path) -> Vec<String> {
    match std::fs::read_dir(state.join("journal")) {
        Ok(entries) => entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".json"))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Any of the writer's temporaries or backups left in a tree.
pub fn strays(tree: &Tree) -> Vec<&String> {
    tree.keys()
        .filter(|k| {
            let name = k.rsplit('/').next().unwrap();
            name.starts_with(serverfs_write::TEMP_PREFIX)
                || name.starts_with(serverfs_write::BACKUP_PREFIX)
        })
        .collect()
}
