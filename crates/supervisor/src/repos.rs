//! The git repositories below a project root, found for the view to pin
//! (see the mounts module): what a command must not be able to plant code
//! in for the operator's git to run later.
//!
//! Guarantees:
//! - Found: every `.git` directory below the root (nested repositories
//!   too), the git directory a `.git` file's `gitdir:` names when it lies
//!   below the root (worktrees, submodules), and every submodule git
//!   directory below `<git dir>/modules` (nested submodules too).
//! - Symbolic links are never followed, and nothing outside the root is
//!   returned.
//! - Bounded: at most [`MAX_DIRECTORIES`] directories are read, nearest to
//!   the root first; repositories deeper in a larger tree are not found.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

/// The most directories one walk reads.
pub(crate) const MAX_DIRECTORIES: usize = 200_000;

/// The git directories below `root` (a directory, absolute): `…/.git`,
/// `…/.git/modules/…`, in walk order.
pub(crate) fn below(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut queue = VecDeque::from([root.to_path_buf()]);
    let mut read = 0;
    while let Some(dir) = queue.pop_front() {
        if read == MAX_DIRECTORIES {
            break;
        }
        read += 1;
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else { continue };
            let path = entry.path();
            if entry.file_name() == ".git" {
                if kind.is_dir() {
                    add_with_modules(&path, &mut found);
                } else if let Some(target) = kind
                    .is_file()
                    .then(|| gitdir_target(&path))
                    .flatten()
                    .filter(|t| t.starts_with(root))
                {
                    add_with_modules(&target, &mut found);
                }
            } else if kind.is_dir() {
                queue.push_back(path);
            }
        }
    }
    found
}

/// `git_dir` (if it is one and not yet listed) and the submodule git
/// directories below its `modules`.
fn add_with_modules(git_dir: &Path, out: &mut Vec<PathBuf>) {
    if !is_git_dir(git_dir) || out.iter().any(|d| d == git_dir) {
        return;
    }
    out.push(git_dir.to_path_buf());
    let mut queue = VecDeque::from([git_dir.join("modules")]);
    // Submodule names may contain slashes: a module's git directory can lie
    // several levels below `modules`; a git directory's own `modules` holds
    // its nested submodules.
    while let Some(dir) = queue.pop_front() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let path = entry.path();
            if is_git_dir(&path) {
                out.push(path.clone());
                queue.push_back(path.join("modules"));
            } else {
                queue.push_back(path);
            }
        }
    }
}

/// A git directory has `HEAD` and `objects` (or, a linked worktree's,
/// `HEAD` and `commondir`).
fn is_git_dir(dir: &Path) -> bool {
    let has = |name: &str| std::fs::symlink_metadata(dir.join(name)).is_ok();
    !std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink())
        && has("HEAD")
        && (has("objects") || has("commondir"))
}

/// The directory a `.git` file's `gitdir: <path>` line names (relative to
/// the file's directory), without `.` or `..` components; `None` if it has
/// none or climbs above `/`.
fn gitdir_target(dot_git_file: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(dot_git_file).ok()?;
    let named = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    let base = dot_git_file.parent()?;
    let mut target = PathBuf::new();
    for part in base.join(named).components() {
        match part {
            std::path::Component::ParentDir => {
                if !target.pop() {
                    return None;
                }
            }
            std::path::Component::CurDir => {}
            other => target.push(other),
        }
    }
    Some(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git_dir(at: &Path) {
        std::fs::create_dir_all(at.join("objects")).unwrap();
        std::fs::write(at.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    }

    #[test]
    fn every_repository_below_the_root_is_found_and_nothing_outside() {
        let outside = tempfile::tempdir().unwrap();
        git_dir(&outside.path().join("elsewhere.git"));
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        git_dir(&root.join(".git"));
        git_dir(&root.join(".git/modules/lib"));
        git_dir(&root.join(".git/modules/a/b"));
        git_dir(&root.join(".git/modules/lib/modules/inner"));
        git_dir(&root.join("vendor/dep/.git"));
        // A worktree's .git file pointing below the root, and one pointing out.
        git_dir(&root.join("store/wt.git"));
        std::fs::create_dir_all(root.join("wt")).unwrap();
        std::fs::write(root.join("wt/.git"), "gitdir: ../store/wt.git\n").unwrap();
        std::fs::create_dir_all(root.join("out")).unwrap();
        let away = format!("gitdir: {}\n", outside.path().join("elsewhere.git").display());
        std::fs::write(root.join("out/.git"), away).unwrap();
        // Not a repository: a `.git` directory without HEAD; a symlink.
        std::fs::create_dir_all(root.join("empty/.git")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("link")).unwrap();

        let mut found = below(root);
        found.sort();
        let mut expected: Vec<PathBuf> = [
            ".git",
            ".git/modules/a/b",
            ".git/modules/lib",
            ".git/modules/lib/modules/inner",
            "store/wt.git",
            "vendor/dep/.git",
        ]
        .iter()
        .map(|p| root.join(p))
        .collect();
        expected.sort();
        assert_eq!(found, expected);
    }

    #[test]
    fn gitdir_paths_are_resolved_without_climbing_above_the_root_of_the_fs() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".git");
        std::fs::write(&file, "gitdir: ./a/../b\n").unwrap();
        assert_eq!(gitdir_target(&file), Some(dir.path().join("b")));
        let climbs = format!("gitdir: {}", "../".repeat(65));
        std::fs::write(&file, climbs).unwrap();
        assert_eq!(gitdir_target(&file), None);
    }
}
