//! Finding this process's child processes, for the supervisor's kill loop
//! and the server's orphan sweep.
//!
//! Two ways, one cheap and one exhaustive:
//!
//! - [`listed`]: `/proc/self/task/<tid>/children` of every thread (a
//!   child, and an orphan re-parented to a subreaper, hangs below one of
//!   its threads). A few small reads, whatever the number of processes on
//!   the machine. The kernel builds each file one entry at a time, so a
//!   child reaped or moved to another thread *while* the file is read may
//!   make it skip the next entry: a listing can miss a child when this
//!   process's children change under it. `None` on a kernel without
//!   `CONFIG_PROC_CHILDREN`.
//! - [`scanned`]: every `/proc/<pid>/stat`, keeping those whose parent is
//!   us. Exact (a process that lives through the scan is seen, whatever
//!   comes and goes), but it reads one file per process on the machine,
//!   and `stat` is an expensive file (a few hundred of them cost
//!   milliseconds).
//!
//! Callers use the listing where a miss is caught later and the scan where
//! it would not be.

use std::io::Read;

/// The pids of our children, from every thread's `children` file; `None`
/// when the files are missing (or unreadable).
pub fn listed() -> Option<Vec<i32>> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let mut pids = Vec::new();
    // One read per file when it fits: the kernel walks the list once per
    // read call, following each entry to the next.
    let mut buf = vec![0u8; 16 * 1024];
    for task in tasks {
        let mut path = task.ok()?.path();
        path.push("children");
        let mut file = match std::fs::File::open(&path) {
            Ok(file) => file,
            // The thread ended meanwhile: its children moved to another
            // thread, read next (or they are found by the caller's next
            // round).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && path_parent_gone(&path) => {
                continue;
            }
            Err(_) => return None,
        };
        let mut text = Vec::new();
        loop {
            match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => text.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // The thread ended while we read: as above.
                Err(_) => break,
            }
        }
        pids.extend(
            text.split(|b| b.is_ascii_whitespace())
                .filter_map(|w| std::str::from_utf8(w).ok()?.parse::<i32>().ok()),
        );
    }
    Some(pids)
}

/// The task directory of a missing `children` file is gone too (the thread
/// ended), rather than the file being unsupported.
fn path_parent_gone(children: &std::path::Path) -> bool {
    children.parent().is_some_and(|task| !task.exists())
}

/// The pids of our children, from a scan of every `/proc/<pid>/stat`.
pub fn scanned() -> Vec<i32> {
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me && parent_of(pid) == Some(me))
        .collect()
}

/// Whether `pid` is a child of ours now (its `/proc/PID/stat` says so).
pub fn is_ours(pid: i32) -> bool {
    parent_of(pid) == Some(std::process::id() as i32)
}

/// The parent pid from `/proc/PID/stat` (the field after the state, after
/// the last `)` since the command name may hold anything).
fn parent_of(pid: i32) -> Option<i32> {
    let mut stat = Vec::with_capacity(1024);
    std::fs::File::open(format!("/proc/{pid}/stat")).ok()?.read_to_end(&mut stat).ok()?;
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let _state = fields.next()?;
    fields.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_of_self_is_our_parent() {
        let me = std::process::id() as i32;
        let parent = rustix::process::getppid().map(|p| p.as_raw_pid());
        assert_eq!(parent_of(me), parent);
    }

    #[test]
    fn listing_and_scan_both_find_a_child_from_another_thread() {
        let mut child = std::thread::spawn(|| {
            std::process::Command::new("sleep").arg("30").spawn().expect("sleep runs")
        })
        .join()
        .unwrap();
        let pid = child.id() as i32;
        let listed = listed().expect("CONFIG_PROC_CHILDREN");
        let scanned = scanned();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(listed.contains(&pid), "{listed:?} lacks {pid}");
        assert!(scanned.contains(&pid), "{scanned:?} lacks {pid}");
        assert!(!listed.contains(&(std::process::id() as i32)));
    }
}
